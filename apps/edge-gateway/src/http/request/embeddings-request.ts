import { z } from 'zod';
import type { EmbeddingsRequest } from '../../adapters/adapter';
import { invalidRequest } from '../../errors';
import { firstErrorArray } from './first-error-array';
import { modelField, parseWith } from './request-schemas';

const INPUT_ERROR =
  'input must be a string, an array of strings, an array of token ids or an array of such arrays, never empty';
const isTokenId = (value: unknown): value is number => Number.isInteger(value) && (value as number) >= 0;
const isString = (value: unknown): value is string => typeof value === 'string';
/** A non-empty array of token ids, checked up to its first bad element ({@link firstErrorArray}). */
const tokens = firstErrorArray(
  { is: isTokenId, error: 'a token id must be an integer, 0 or more' },
  {
    error: INPUT_ERROR,
    min: 1,
  },
);

/** `POST /v1/embeddings` body (OpenAI API reference, "Create embeddings"): what the gateway reads; the rest passes through. */
const embeddingsRequestSchema = z.looseObject({
  model: modelField,
  // Every array option stops at its first bad element, so a bad input costs O(its position) per option.
  input: z.union(
    [
      z.string(),
      firstErrorArray({ is: isString, error: INPUT_ERROR }, { error: INPUT_ERROR, min: 1 }),
      tokens,
      firstErrorArray(tokens, { error: INPUT_ERROR, min: 1 }),
    ],
    { error: (issue) => (issue.input === undefined ? 'you must provide an input' : INPUT_ERROR) },
  ),
  encoding_format: z.enum(['float', 'base64'], { error: "encoding_format must be 'float' or 'base64'" }).optional(),
  dimensions: z
    .number({ error: 'dimensions must be a positive integer' })
    .int('dimensions must be a positive integer')
    .positive('dimensions must be a positive integer')
    .optional(),
});

/**
 * Most inputs one embeddings request may hold (OpenAI API reference, "Create embeddings": an array
 * input holds at most 2048 items). The answer holds one vector per input, so this bounds it.
 */
export const MAX_EMBEDDINGS_INPUTS = 2048;
/** Most token ids one embeddings input may hold (OpenAI API reference: each input at most 8192 tokens). */
export const MAX_INPUT_TOKEN_IDS = 8192;

/**
 * Refuses an embeddings `input` past OpenAI's limits before the schema walks it (README
 * "Embeddings"): more than {@link MAX_EMBEDDINGS_INPUTS} inputs, or an input of more than
 * {@link MAX_INPUT_TOKEN_IDS} token ids. A flat array whose first item is a number is one input of
 * token ids; any other array is a list of inputs. Costs O(1) for the count and O(inputs) for the
 * token arrays; values of the wrong type are left to the schema.
 * @throws ApiError 400 `invalid_request_error`, `param` `input` (the count, or a flat token array)
 *   or `input[i]` (the first list of token ids that is too long).
 */
function checkInputLimits(input: unknown): void {
  if (!Array.isArray(input)) return;
  if (typeof input[0] === 'number') {
    if (input.length > MAX_INPUT_TOKEN_IDS) throw tooManyTokens(input.length, 'input');
    return;
  }
  if (input.length > MAX_EMBEDDINGS_INPUTS) {
    throw invalidRequest(
      `Invalid 'input': ${input.length} inputs; an embeddings request holds at most ${MAX_EMBEDDINGS_INPUTS} (OpenAI API reference: an array input must be ${MAX_EMBEDDINGS_INPUTS} dimensions or less). Send the rest in further requests.`,
      'input',
    );
  }
  for (let i = 0; i < input.length; i++) {
    const item: unknown = input[i];
    if (Array.isArray(item) && item.length > MAX_INPUT_TOKEN_IDS) throw tooManyTokens(item.length, `input[${i}]`);
  }
}

/** The 400 for one input of `count` token ids, past {@link MAX_INPUT_TOKEN_IDS}. */
const tooManyTokens = (count: number, param: string) =>
  invalidRequest(
    `Invalid '${param}': ${count} token ids; an embeddings input holds at most ${MAX_INPUT_TOKEN_IDS} (OpenAI API reference: each input must not exceed ${MAX_INPUT_TOKEN_IDS} tokens).`,
    param,
  );

/**
 * Checks a parsed `POST /v1/embeddings` body: a JSON object nested at most `MAX_BODY_DEPTH` levels,
 * with `model`, `input` (at most {@link MAX_EMBEDDINGS_INPUTS} inputs, each of at most
 * {@link MAX_INPUT_TOKEN_IDS} token ids) and (when present) `encoding_format` and `dimensions` of
 * the right shape.
 * @throws ApiError 400 `invalid_request_error` naming the first bad parameter.
 */
export function parseEmbeddingsRequest(body: unknown): EmbeddingsRequest {
  if (body !== null && typeof body === 'object') checkInputLimits((body as { input?: unknown }).input);
  return parseWith(embeddingsRequestSchema, body, 'input');
}
