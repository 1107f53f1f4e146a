import { z } from 'zod';
import { invalidRequest } from '../errors';
import type { ChatRequest, ResponsesRequest } from '../adapters/adapter';

const contentPart = z.looseObject({ type: z.string(), text: z.string().optional() });

/** `POST /v1/chat/completions` body: the fields the gateway relies on; the rest passes through (OpenAI API reference). */
/** `model`: a missing one and one of the wrong type get different messages. */
const model = z
  .string({ error: (issue) => (issue.input === undefined ? 'you must provide a model parameter' : 'model must be a string') })
  .min(1, 'you must provide a model parameter');

const chatRequestSchema = z.looseObject({
  model,
  messages: z
    .array(
      z.looseObject({
        role: z.string({ error: 'each message needs a string role' }),
        content: z.union([z.string(), z.array(contentPart), z.null()]).optional(),
      }),
      { error: 'messages must be an array of {role, content} objects' },
    )
    .min(1, 'messages must contain at least one message'),
  stream: z.boolean({ error: 'stream must be a boolean' }).optional(),
});

/** `POST /v1/responses` body (OpenAI API reference): `model` and `input` are what the gateway reads. */
const responsesRequestSchema = z.looseObject({
  model,
  input: z.union([z.string(), z.array(z.looseObject({}))], { error: 'input must be a string or an array of input items' }).optional(),
  instructions: z.string().nullable().optional(),
  stream: z.boolean({ error: 'stream must be a boolean' }).optional(),
});

function parseWith<T>(schema: z.ZodType<T>, body: unknown): T {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw invalidRequest('The request body must be a JSON object.');
  }
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const param = issue.path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
  throw invalidRequest(`Invalid '${param}': ${issue.message}.`, param || null);
}

/** @throws ApiError 400 `invalid_request_error` naming the first bad parameter. */
export const parseChatRequest = (body: unknown): ChatRequest => parseWith(chatRequestSchema, body) as ChatRequest;
/** @throws ApiError 400 `invalid_request_error` naming the first bad parameter. */
export const parseResponsesRequest = (body: unknown): ResponsesRequest => parseWith(responsesRequestSchema, body) as ResponsesRequest;
