import type { FakeKnobs } from './knobs';
import { isObject } from './knobs';
import { echoReply } from './prompt';

/**
 * The reasoning a reasoning model's chat answer carries, as servers send it: the fields that carry
 * it (`reasoning_content`: vLLM before 0.11; `reasoning`: vLLM 0.11 and later, Ollama's
 * OpenAI-compatible API; both: a server in transition), its text, and the stream chunks it takes.
 */
export interface ChatReasoning {
  fields: Array<'reasoning' | 'reasoning_content'>;
  text: string;
  /** Stream chunks of reasoning, sent before the content chunks. */
  chunks: number;
}

/**
 * The reasoning the knobs ask for (`reasoning` / `reasoning_content`: that many chunks in that
 * field), undefined when neither is set. Its text: `thinking about: <last user text>`.
 */
export function chatReasoning(knobs: FakeKnobs, lastUserText: string): ChatReasoning | undefined {
  const fields: ChatReasoning['fields'] = [];
  if (knobs.reasoningContent > 0) fields.push('reasoning_content');
  if (knobs.reasoning > 0) fields.push('reasoning');
  if (fields.length === 0) return undefined;
  return {
    fields,
    text: `thinking about: ${lastUserText}`,
    chunks: Math.max(knobs.reasoning, knobs.reasoningContent),
  };
}

/**
 * The reply text. A chat request with `response_format` `json_object` or `json_schema` (Structured
 * Outputs) gets the echo as a JSON document `{"echo", "model", "upstream"}` (all strings), as a server
 * held to the format answers; anything else gets {@link echoReply}.
 */
export function replyText(body: Record<string, unknown>, lastUserText: string, model: string, name: string): string {
  const format = isObject(body.response_format) ? body.response_format.type : undefined;
  if (format === 'json_object' || format === 'json_schema')
    return JSON.stringify({ echo: lastUserText, model, upstream: name });
  return echoReply(lastUserText, model, name);
}
