import { z } from 'zod';
import type { EmbeddingsRequest } from '../../adapters/adapter';
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
 * Checks a parsed `POST /v1/embeddings` body: a JSON object nested at most `MAX_BODY_DEPTH` levels,
 * with `model`, `input` and (when present) `encoding_format` and `dimensions` of the right shape.
 * @throws ApiError 400 `invalid_request_error` naming the first bad parameter.
 */
export const parseEmbeddingsRequest = (body: unknown): EmbeddingsRequest =>
  parseWith(embeddingsRequestSchema, body, 'input');
