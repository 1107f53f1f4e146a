/** An answer is complete when a stream ends with `[DONE]`, `response.completed` or an error event. */
export function streamEnded(text: string): boolean {
  return (
    text.includes('data: [DONE]') ||
    text.includes('response.completed') ||
    /data: \{"error"|event: error|"type":"error"/.test(text)
  );
}

/** `error <status> <code>` for an OpenAI-shaped error body, else undefined. */
export function openAiError(status: number, text: string): string | undefined {
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown; type?: unknown; code?: unknown } };
    if (
      typeof body.error?.message === 'string' &&
      typeof body.error.type === 'string' &&
      typeof body.error.code === 'string'
    )
      return `error ${status} ${body.error.code}`;
  } catch {
    // not JSON
  }
  return undefined;
}
