import { z } from 'zod';
import type { EmbeddingsRequest } from '../../adapters/adapter';
import { modelField, parseWith } from './request-schemas';

const tokens = z.array(z.number().int().nonnegative());

/** `POST /v1/embeddings` body (OpenAI API reference, "Create embeddings"): what the gateway reads; the rest passes through. */
const embeddingsRequestSchema = z.looseObject({
  model: modelField,
  input: z.union([z.string(), z.array(z.string()).min(1), tokens.min(1), z.array(tokens.min(1)).min(1)], {
    error: (issue) =>
      issue.input === undefined
        ? 'you must provide an input'
        : 'input must be a string, an array of strings, an array of token ids or an array of such arrays, never empty',
  }),
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
