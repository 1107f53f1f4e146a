import { randomBytes } from 'node:crypto';
import type { ResponseEcho } from './request-echo';

/**
 * The text part of an assistant message in a Response (OpenAI API reference, `ResponseOutputText`).
 * Upstreams reached through chat completions produce text only, so `annotations` is always empty.
 */
export interface OutputTextPart {
  type: 'output_text';
  text: string;
  annotations: never[];
}

/** An assistant message item of `Response.output` (OpenAI API reference, `ResponseOutputMessage`). */
export interface OutputMessageItem {
  type: 'message';
  /** `msg_…` */
  id: string;
  status: 'in_progress' | 'completed' | 'incomplete';
  role: 'assistant';
  content: OutputTextPart[];
}

/** The raw reasoning of a model (OpenAI API reference, `ResponseReasoningItem.Content`). */
export interface ReasoningTextPart {
  type: 'reasoning_text';
  text: string;
}

/**
 * A reasoning item of `Response.output` (OpenAI API reference, `ResponseReasoningItem`). What vLLM
 * and Ollama send is the model's own reasoning text, not a summary of it: it goes in `content` as one
 * `reasoning_text` part; `summary` (required by the reference) is empty.
 */
export interface ReasoningItem {
  type: 'reasoning';
  /** `rs_…` */
  id: string;
  status: 'in_progress' | 'completed' | 'incomplete';
  summary: never[];
  content: ReasoningTextPart[];
}

/** An item of `Response.output` as this gateway builds it: the reasoning, then the assistant message. */
export type OutputItem = ReasoningItem | OutputMessageItem;

/** Token counts of a Response (OpenAI API reference, `ResponseUsage`). */
export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

/**
 * A Response object (OpenAI `POST /v1/responses`, API reference) as this gateway builds it for
 * upstreams that only speak chat completions. `created_at` is in Unix seconds. The fields the
 * `openai` client reads are all present, so its computed `response.output_text` works. The request's
 * settings are echoed as the reference does ({@link ResponseEcho}: `text.format` as asked, …).
 */
export interface ResponseObject extends ResponseEcho {
  /** `resp_…` */
  id: string;
  object: 'response';
  created_at: number;
  status: 'in_progress' | 'completed' | 'incomplete';
  model: string;
  output: OutputItem[];
  /** `null` while in progress, or when the upstream reported no counts. */
  usage: ResponseUsage | null;
  error: null;
  /** Set when `status` is `incomplete`: the upstream stopped on its token limit or a content filter. */
  incomplete_details: { reason: 'max_output_tokens' | 'content_filter' } | null;
  metadata: Record<string, string>;
  /** `true`, the API's default and the only value carried (no tools run through this translation). */
  parallel_tool_calls: true;
  tool_choice: 'auto';
  tools: never[];
}

/** A fresh OpenAI-style id: `prefix` followed by 48 hex digits, e.g. `resp_3f…`. */
export function newId(prefix: string): string {
  return `${prefix}${randomBytes(24).toString('hex')}`;
}

/**
 * Builds a Response object with the fields every variant shares (see {@link ResponseObject}); the
 * request's settings come from `fields.echo` (`echoOf`, `request-echo.ts`).
 */
export function buildResponseObject(fields: {
  id: string;
  createdAt: number;
  model: string;
  status: ResponseObject['status'];
  output: OutputItem[];
  usage: ResponseUsage | null;
  incompleteReason?: 'max_output_tokens' | 'content_filter';
  echo: ResponseEcho;
}): ResponseObject {
  const { echo } = fields;
  return {
    id: fields.id,
    object: 'response',
    created_at: fields.createdAt,
    status: fields.status,
    model: fields.model,
    output: fields.output,
    usage: fields.usage,
    error: null,
    incomplete_details: fields.incompleteReason ? { reason: fields.incompleteReason } : null,
    instructions: echo.instructions,
    max_output_tokens: echo.max_output_tokens,
    temperature: echo.temperature,
    top_p: echo.top_p,
    reasoning: echo.reasoning,
    text: echo.text,
    metadata: {},
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: [],
  };
}

/** A reasoning item holding the model's reasoning `text` as one `reasoning_text` part. */
export function buildReasoningItem(id: string, text: string, status: ReasoningItem['status']): ReasoningItem {
  return { type: 'reasoning', id, status, summary: [], content: [{ type: 'reasoning_text', text }] };
}

/**
 * The reasoning text of a chat message or delta, '' when none: `reasoning` (vLLM 0.11 and later,
 * Ollama's OpenAI-compatible API) or else `reasoning_content` (vLLM before 0.11, DeepSeek's API);
 * one of them only, since a server in transition may send both with the same text.
 */
export function reasoningOf(message: Record<string, unknown>): string {
  if (typeof message.reasoning === 'string' && message.reasoning !== '') return message.reasoning;
  return typeof message.reasoning_content === 'string' ? message.reasoning_content : '';
}

/** An assistant message item holding one text part. */
export function buildMessageItem(id: string, text: string, status: OutputMessageItem['status']): OutputMessageItem {
  return { type: 'message', id, status, role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] };
}

/**
 * Maps chat completion `usage` (`prompt_tokens`, `completion_tokens`, `total_tokens`) to Response
 * usage; `null` when the upstream sent none or sent no numbers.
 */
export function usageFromChat(usage: unknown): ResponseUsage | null {
  if (!isRecord(usage)) return null;
  const input = usage.prompt_tokens;
  const output = usage.completion_tokens;
  if (typeof input !== 'number' || typeof output !== 'number') return null;
  const total = typeof usage.total_tokens === 'number' ? usage.total_tokens : input + output;
  const cached =
    isRecord(usage.prompt_tokens_details) && typeof usage.prompt_tokens_details.cached_tokens === 'number'
      ? usage.prompt_tokens_details.cached_tokens
      : 0;
  const reasoning =
    isRecord(usage.completion_tokens_details) && typeof usage.completion_tokens_details.reasoning_tokens === 'number'
      ? usage.completion_tokens_details.reasoning_tokens
      : 0;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: reasoning },
    total_tokens: total,
  };
}

/**
 * The Response status for a chat `finish_reason`: `length` (token limit) and `content_filter`
 * make the response `incomplete`, as OpenAI reports them; anything else is `completed`.
 */
export function statusFromFinishReason(finishReason: unknown): {
  status: 'completed' | 'incomplete';
  incompleteReason?: 'max_output_tokens' | 'content_filter';
} {
  if (finishReason === 'length') return { status: 'incomplete', incompleteReason: 'max_output_tokens' };
  if (finishReason === 'content_filter') return { status: 'incomplete', incompleteReason: 'content_filter' };
  return { status: 'completed' };
}

/** True for a non-null, non-array object. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
