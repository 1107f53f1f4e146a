import { z } from 'zod';
import { echoed, invalidRequest } from '../../errors';
import type { ChatRequest, ResponsesRequest } from '../../adapters/adapter';
import { firstErrorArray } from './first-error-array';
import { findTooDeep, MAX_BODY_DEPTH, tooDeepMessage } from './json-depth';

/** Roles of a chat message: the closed OpenAI set (README "Errors"); anything else is a 400 naming the message. */
const CHAT_ROLES = ['system', 'developer', 'user', 'assistant', 'tool', 'function'] as const;
/** Roles of a Responses input message (OpenAI API reference). */
const RESPONSES_ROLES = ['system', 'developer', 'user', 'assistant'] as const;

const contentPart = z.looseObject({ type: z.string(), text: z.string().optional() });

/** `model`: a missing one and one of the wrong type get different messages. */
export const modelField = z
  .string({
    error: (issue) => (issue.input === undefined ? 'you must provide a model parameter' : 'model must be a string'),
  })
  .min(1, 'you must provide a model parameter');

/**
 * A count the gateway weighs a request by (`max_tokens`, `max_completion_tokens`, `n`,
 * `max_output_tokens`; OpenAI API reference: integers): a whole number ≥ `min`, a string of digits (as
 * lenient servers read one, weighed as its number), or null. Anything else (negative, fractional,
 * another string) is a 400 naming the field: forwarded, a server would read it its own way while the
 * gateway reserved the default (README "Token budgets: what a client sees").
 */
const countField = (name: string, min: number) => {
  const error = `${name} must be a whole number, ${min} or more`;
  return z
    .union(
      [z.number().refine((n) => Number.isInteger(n) && n >= min, error), z.string().regex(/^\s*\d{1,16}\s*$/, error)],
      {
        error,
      },
    )
    .nullable()
    .optional();
};

/**
 * `POST /v1/chat/completions` body: the fields the gateway relies on; the rest passes through
 * (OpenAI API reference). Arrays are {@link firstErrorArray}s: checking stops at the first bad element.
 */
const chatRequestSchema = z.looseObject({
  model: modelField,
  messages: firstErrorArray(
    z.looseObject({
      role: z.enum(CHAT_ROLES, {
        error: (issue) =>
          typeof issue.input === 'string'
            ? `role must be one of ${CHAT_ROLES.join(', ')}`
            : 'each message needs a string role',
      }),
      content: z
        .union([
          z.string(),
          firstErrorArray(contentPart, { error: 'content must be a string or an array of parts' }),
          z.null(),
        ])
        .optional(),
    }),
    {
      error: 'messages must be an array of {role, content} objects',
      min: 1,
      minError: 'messages must contain at least one message',
    },
  ),
  stream: z.boolean({ error: 'stream must be a boolean' }).optional(),
  max_tokens: countField('max_tokens', 0),
  max_completion_tokens: countField('max_completion_tokens', 0),
  n: countField('n', 1),
});

/** A Responses input item: any object; a `role`, when present, one of the Responses roles. */
const responsesInputItem = z.looseObject({
  role: z.enum(RESPONSES_ROLES, { error: `role must be one of ${RESPONSES_ROLES.join(', ')}` }).optional(),
});

/**
 * `POST /v1/responses` body (OpenAI API reference): `model` and `input` are what the gateway reads.
 * `input` as an array is a {@link firstErrorArray}: checking stops at the first bad item.
 */
const responsesRequestSchema = z.looseObject({
  model: modelField,
  input: z
    .union(
      [z.string(), firstErrorArray(responsesInputItem, { error: 'input must be a string or an array of input items' })],
      { error: 'input must be a string or an array of input items' },
    )
    .optional(),
  instructions: z.string().nullable().optional(),
  stream: z.boolean({ error: 'stream must be a boolean' }).optional(),
  max_output_tokens: countField('max_output_tokens', 0),
});

/**
 * Checks a parsed body against `schema` (README "Errors"): a JSON object, nested at most
 * `MAX_BODY_DEPTH` levels, then the schema. The schema's own output type (`z.infer`) is checked
 * against the request interface by the compiler where a parser returns it: no cast joins the two,
 * so a schema that stops matching its interface fails the build.
 * @param unionParam the parameter named when the first issue is a union at the body's root.
 * @throws ApiError 400 `invalid_request_error` naming the first bad parameter (for a body nested
 *   too deep, the top-level field under which it goes past the limit).
 */
export function parseWith<T>(schema: z.ZodType<T>, body: unknown, unionParam = ''): T {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw invalidRequest('The request body must be a JSON object.');
  }
  // Before the schema and before admission: nothing downstream ever sees a body it cannot serialise (README "Errors").
  const tooDeep = findTooDeep(body, MAX_BODY_DEPTH);
  if (tooDeep) throw invalidRequest(tooDeepMessage(tooDeep), tooDeep.field);
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  // The path names the client's keys: bounded as every client string an error echoes.
  const param = echoed(
    issue.path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('') ||
      (issue.code === 'invalid_union' ? unionParam : ''),
  );
  throw invalidRequest(`Invalid '${param}': ${echoed(issue.message)}.`, param || null);
}

/**
 * Checks a parsed `POST /v1/chat/completions` body: a JSON object, nested at most `MAX_BODY_DEPTH`
 * levels, with `model` and `messages` of the right shape; unknown fields pass through.
 * @throws ApiError 400 `invalid_request_error` naming the first bad parameter (for a body nested
 *   too deep, the top-level field under which it goes past the limit).
 */
export const parseChatRequest = (body: unknown): ChatRequest => parseWith(chatRequestSchema, body);
/**
 * Checks a parsed `POST /v1/responses` body: a JSON object, nested at most `MAX_BODY_DEPTH`
 * levels, with `model` (and `input`, `instructions`, `stream` when present) of the right shape.
 * @throws ApiError 400 `invalid_request_error` as {@link parseChatRequest}.
 */
export const parseResponsesRequest = (body: unknown): ResponsesRequest => parseWith(responsesRequestSchema, body);
