import { tokenCount } from '../dispatch/token-usage';
import { upstreamError } from '../errors';
import type { EmbeddingsRequest } from './adapter';

/**
 * An upstream's embeddings answer in the OpenAI shape (API reference, "Embeddings"): `{object:
 * "list", data: [{object: "embedding", index, embedding}], model, usage: {prompt_tokens,
 * total_tokens}}`. vLLM and Ollama answer this shape already, with differences this smooths over:
 * - a vector sent as floats when the client asked for `encoding_format: "base64"` (servers that
 *   ignore the field; the `openai` client asks for base64 by default and decodes it) is encoded
 *   here: little-endian float32, base64, as OpenAI sends it;
 * - a missing `object` or `index` is filled in, and a missing `usage.total_tokens` (embeddings
 *   count prompt tokens only); a missing `usage` stays missing (never a made-up 0).
 * Anything else in the answer is kept. The answer is parsed, so it is bounded by
 * `gateway.max_response_bytes` before it gets here.
 * @throws UpstreamError 502 when the answer is not JSON with a `data` array of vectors.
 */
export function normalizeEmbeddings(
  body: Uint8Array | string,
  req: Pick<EmbeddingsRequest, 'encoding_format'>,
): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(typeof body === 'string' ? body : Buffer.from(body).toString('utf8'));
  } catch {
    throw upstreamError('The upstream answered embeddings that are not JSON.', {
      detail: 'embeddings answer is not JSON',
    });
  }
  const answer = parsed as Record<string, unknown> | null;
  if (typeof answer !== 'object' || answer === null || !Array.isArray(answer.data)) {
    throw upstreamError('The upstream answered something other than embeddings (no data list).', {
      detail: `embeddings answer without data: ${JSON.stringify(parsed).slice(0, 300)}`,
    });
  }
  const base64 = req.encoding_format === 'base64';
  const data = answer.data.map((item: unknown, i: number) => {
    const entry = (typeof item === 'object' && item !== null ? item : {}) as Record<string, unknown>;
    let embedding = entry.embedding;
    if (base64 && Array.isArray(embedding)) embedding = floatsToBase64(embedding as number[]);
    else if (!Array.isArray(embedding) && typeof embedding !== 'string') {
      throw upstreamError('The upstream answered an embedding that is not a vector.', {
        detail: `embeddings answer data[${i}] has no vector`,
      });
    }
    return { ...entry, object: 'embedding', index: typeof entry.index === 'number' ? entry.index : i, embedding };
  });
  return JSON.stringify({ ...answer, object: 'list', data, ...withTotal(answer.usage) });
}

/**
 * The answer's `usage` as the upstream sent it, with `total_tokens` added when it names a valid
 * `prompt_tokens` ({@link tokenCount}) and no total. A missing usage is not made up: the gateway
 * then counts its own estimate (README "Token budgets: what a client sees").
 */
function withTotal(usage: unknown): { usage?: unknown } {
  if (typeof usage !== 'object' || usage === null || Array.isArray(usage)) return usage === undefined ? {} : { usage };
  const record = usage as Record<string, unknown>;
  const prompt = tokenCount(record.prompt_tokens);
  return {
    usage: prompt !== undefined && record.total_tokens === undefined ? { ...record, total_tokens: prompt } : record,
  };
}

/** Float vector → little-endian float32 bytes → base64 (OpenAI's `encoding_format: "base64"`). */
export function floatsToBase64(values: number[]): string {
  const bytes = Buffer.alloc(values.length * 4);
  values.forEach((v, i) => bytes.writeFloatLE(Number(v), i * 4));
  return bytes.toString('base64');
}
