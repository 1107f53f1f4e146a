import { echoed, invalidRequest } from '../../errors';
import type { ResponsesRequest } from '../adapter';
import { isRecord } from './response-object';

/**
 * A Responses `text.format` (OpenAI API reference, `ResponseFormatTextConfig`): plain text, JSON
 * mode, or Structured Outputs with a JSON Schema.
 */
export type TextFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | {
      type: 'json_schema';
      /** The format's name, as the client gave it. */
      name: string;
      /** The JSON Schema the answer follows. */
      schema: Record<string, unknown>;
      /** Present when the client set it. */
      strict?: boolean | null;
      /** Present when the client set it. */
      description?: string;
    };

/** A Responses `text` setting as this gateway carries it (OpenAI API reference, `ResponseTextConfig`). */
export interface TextConfig {
  format: TextFormat;
  /** Present when the client set it; only `medium` (the API's default) is carried through chat. */
  verbosity?: 'medium';
}

/**
 * The request settings a Response object reports back (OpenAI API reference, `Response`: the
 * response "echoes" the request's `instructions`, `text`, `reasoning`, sampling and length settings).
 * `null` where the client set nothing (the upstream's own default applies, which the gateway does not know).
 */
export interface ResponseEcho {
  instructions: string | null;
  max_output_tokens: number | null;
  temperature: number | null;
  top_p: number | null;
  /** `{effort, summary}` as asked, each `null` when not set; `null` when `reasoning` was not sent. */
  reasoning: { effort: string | null; summary: string | null } | null;
  text: TextConfig;
}

/** What a Response echoes for a request that set nothing: plain text, the upstream's own defaults. */
export const DEFAULT_ECHO: Readonly<ResponseEcho> = Object.freeze({
  instructions: null,
  max_output_tokens: null,
  temperature: null,
  top_p: null,
  reasoning: null,
  text: { format: { type: 'text' as const } },
});

const FORMAT_TYPES = ['text', 'json_object', 'json_schema'];

/**
 * Reads and checks a request's `text` (OpenAI API reference, `ResponseTextConfig`): `format` one of
 * `{type: "text"}`, `{type: "json_object"}`, `{type: "json_schema", name, schema, strict?, description?}`
 * (`{type: "text"}` when absent); `verbosity` only `medium` (the default): chat completions through
 * this translation have no verbosity control (README "Request fields per adapter").
 * @throws ApiError 400 `invalid_request_error` naming the part that is wrong (`text`, `text.format`,
 *   `text.format.type`, `text.format.name`, `text.format.schema`, `text.format.strict`,
 *   `text.format.description`, `text.verbosity`), as the OpenAI API answers such a request.
 */
export function readTextConfig(text: unknown): TextConfig {
  if (text == null) return { format: { type: 'text' } };
  if (!isRecord(text)) throw invalidRequest('text must be an object {format, verbosity}.', 'text');
  const config: TextConfig = { format: readFormat(text.format) };
  if (text.verbosity != null) {
    if (text.verbosity !== 'medium') {
      throw invalidRequest(
        `text.verbosity ${echoed(JSON.stringify(text.verbosity) ?? String(text.verbosity))} is not supported for this model: it is reached through chat completions, which have no verbosity control. Remove it and retry.`,
        'text.verbosity',
      );
    }
    config.verbosity = 'medium';
  }
  return config;
}

function readFormat(format: unknown): TextFormat {
  if (format == null) return { type: 'text' };
  if (!isRecord(format)) throw invalidRequest('text.format must be an object with a type.', 'text.format');
  const { type } = format;
  if (typeof type !== 'string' || !FORMAT_TYPES.includes(type)) {
    throw invalidRequest(
      `Invalid value for text.format.type: ${echoed(JSON.stringify(type) ?? String(type))}. Supported values are: 'text', 'json_object', and 'json_schema'.`,
      'text.format.type',
    );
  }
  if (type === 'text' || type === 'json_object') return { type };
  const { name, schema, strict, description } = format;
  if (typeof name !== 'string' || name === '')
    throw invalidRequest(
      'Missing required parameter: text.format.name (a json_schema format needs a name).',
      'text.format.name',
    );
  if (!isRecord(schema))
    throw invalidRequest(
      'Missing required parameter: text.format.schema (a JSON Schema object).',
      'text.format.schema',
    );
  if (strict !== undefined && strict !== null && typeof strict !== 'boolean')
    throw invalidRequest('text.format.strict must be true, false or null.', 'text.format.strict');
  if (description !== undefined && typeof description !== 'string')
    throw invalidRequest('text.format.description must be a string.', 'text.format.description');
  return {
    type: 'json_schema',
    name,
    schema,
    ...(strict !== undefined ? { strict } : {}),
    ...(description !== undefined ? { description } : {}),
  };
}

/**
 * Chat completions' `response_format` for a `text.format` (OpenAI API reference of both endpoints):
 * `json_object` as it is, `json_schema` with `{name, schema, strict?, description?}` under
 * `json_schema`; `undefined` for plain text (the chat default, not sent).
 */
export function responseFormatOf(format: TextFormat): Record<string, unknown> | undefined {
  if (format.type === 'json_object') return { type: 'json_object' };
  if (format.type === 'text') return undefined;
  const { type: _type, ...jsonSchema } = format;
  return { type: 'json_schema', json_schema: jsonSchema };
}

/**
 * The settings a Response built for `req` echoes ({@link ResponseEcho}). `req` is the request as
 * the adapter's field table left it, already translated by `responsesToChat` (so `text` is valid).
 * @throws ApiError 400 for an invalid `text` ({@link readTextConfig}).
 */
export function echoOf(req: ResponsesRequest): ResponseEcho {
  const num = (value: unknown) => (typeof value === 'number' ? value : null);
  const str = (value: unknown) => (typeof value === 'string' ? value : null);
  return {
    instructions: typeof req.instructions === 'string' && req.instructions !== '' ? req.instructions : null,
    max_output_tokens: num(req.max_output_tokens),
    temperature: num(req.temperature),
    top_p: num(req.top_p),
    reasoning: isRecord(req.reasoning)
      ? { effort: str(req.reasoning.effort), summary: str(req.reasoning.summary) }
      : null,
    text: readTextConfig(req.text),
  };
}
