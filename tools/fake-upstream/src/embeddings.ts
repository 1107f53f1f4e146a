import { createHash } from 'node:crypto';
import { roughTokens } from './prompt';

/** Dimensions of a fake embedding unless the request asks for `dimensions`. */
const DEFAULT_DIMENSIONS = 8;

/** A deterministic unit-ish vector for `text`: the same text always gets the same vector. */
function fakeVector(text: string, dimensions: number): number[] {
  const out: number[] = [];
  for (let i = 0; out.length < dimensions; i++) {
    const digest = createHash('sha256').update(`${i}:${text}`).digest();
    for (let j = 0; j + 4 <= digest.length && out.length < dimensions; j += 4)
      out.push(Math.round((digest.readUInt32LE(j) / 0xffffffff - 0.5) * 1e6) / 1e6);
  }
  return out;
}

/** The inputs of an embeddings request as texts (`input` a string, strings, token ids or arrays of them). */
function embeddingsInputs(body: Record<string, unknown>): string[] {
  const raw = body.input;
  const inputs: unknown[] =
    typeof raw === 'string'
      ? [raw]
      : Array.isArray(raw) && raw.every((x) => typeof x === 'number')
        ? [raw]
        : Array.isArray(raw)
          ? raw
          : [String(raw)];
  return inputs.map((input) => (typeof input === 'string' ? input : JSON.stringify(input)));
}

/** The `usage.prompt_tokens` (and `total_tokens`) of {@link embeddingsJson}'s answer for `body`. */
export function embeddingsTokens(body: Record<string, unknown>): number {
  return embeddingsInputs(body).reduce((n, text) => n + roughTokens(text.length), 0);
}

/**
 * An OpenAI embeddings answer for `body` (`input` a string, strings, token ids or arrays of them):
 * one vector per input, `encoding_format: "base64"` as little-endian float32, as OpenAI sends it;
 * `usage` counts {@link embeddingsTokens}.
 */
export function embeddingsJson(body: Record<string, unknown>, model: string): string {
  const dimensions = typeof body.dimensions === 'number' && body.dimensions > 0 ? body.dimensions : DEFAULT_DIMENSIONS;
  const base64 = body.encoding_format === 'base64';
  const data = embeddingsInputs(body).map((text, index) => {
    const vector = fakeVector(text, dimensions);
    const embedding = base64 ? floatsToBase64(vector) : vector;
    return { object: 'embedding', index, embedding };
  });
  const tokens = embeddingsTokens(body);
  return JSON.stringify({ object: 'list', data, model, usage: { prompt_tokens: tokens, total_tokens: tokens } });
}

/** Little-endian float32 bytes, base64 (OpenAI's `encoding_format: "base64"`). */
function floatsToBase64(values: number[]): string {
  const bytes = Buffer.alloc(values.length * 4);
  values.forEach((v, i) => bytes.writeFloatLE(v, i * 4));
  return bytes.toString('base64');
}
