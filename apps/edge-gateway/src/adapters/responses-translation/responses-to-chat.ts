import { echoed, invalidRequest } from '../../errors';
import type { ChatMessage, ChatRequest, ResponsesRequest } from '../adapter';
import { readTextConfig, responseFormatOf } from './request-echo';
import { isRecord } from './response-object';

/** Input roles a Responses message item may carry; `developer` becomes `system` for chat-only servers. */
const INPUT_ROLES: Record<string, string> = {
  user: 'user',
  assistant: 'assistant',
  system: 'system',
  developer: 'system',
};
const TEXT_PART_TYPES = new Set(['input_text', 'output_text']);

/** The request fields of the Responses API reference; any other field is an extension, passed on to chat. */
const RESPONSES_FIELDS = new Set([
  'background',
  'conversation',
  'include',
  'input',
  'instructions',
  'max_output_tokens',
  'max_tool_calls',
  'metadata',
  'model',
  'parallel_tool_calls',
  'previous_response_id',
  'prompt',
  'prompt_cache_key',
  'reasoning',
  'safety_identifier',
  'service_tier',
  'store',
  'stream',
  'stream_options',
  'temperature',
  'text',
  'tool_choice',
  'tools',
  'top_logprobs',
  'top_p',
  'truncation',
  'user',
]);

/**
 * Translates a Responses API request into a chat completion request (README "Adapters": upstreams
 * without `/v1/responses` get the Responses API translated to chat completions). Field mapping,
 * after the OpenAI API reference of both endpoints:
 * - `input` string → one `user` message; `input` array → one message per item
 *   `{type?: "message", role, content}`, where `content` is a string or a list of
 *   `input_text` / `output_text` parts whose texts are joined with `"\n"`; role `developer` → `system`;
 *   `reasoning` items (a previous answer's output sent back, as the `openai` client's multi-turn
 *   examples do) are left out: chat has no place for them, and reasoning models' chat templates drop
 *   earlier turns' reasoning anyway (README "Request fields per adapter");
 * - `instructions` → a `system` message before every other message;
 * - `max_output_tokens` → `max_tokens`; `temperature`, `top_p`, `user` pass as they are;
 * - `text.format` `json_object` / `json_schema` → `response_format` (`readTextConfig`, `responseFormatOf`);
 *   `reasoning.effort` → `reasoning_effort`;
 * - fields outside the Responses reference (a server's own extensions) are copied as they are;
 * - `stream` is kept; a streamed call also asks for `stream_options.include_usage` so the final
 *   `response.completed` carries token counts when the upstream supports it.
 * `model` is kept as sent (the adapter renames it for the upstream). Which reference fields a given
 * adapter accepts at all is its field table's decision (`request-fields.ts`), made before this runs;
 * the rest of the reference is not carried.
 * @throws ApiError 400 `invalid_request_error` (with `param`) for what chat completions cannot
 *   express: a missing or empty `input`, items other than messages and reasoning (function calls,
 *   item references), non-text content (images, files), `tools`, `previous_response_id`; an invalid
 *   `text` (a `json_schema` without `name` or `schema`, an unknown format type, a `verbosity`).
 */
export function responsesToChat(req: ResponsesRequest): ChatRequest {
  if (req.previous_response_id != null) {
    throw invalidRequest(
      'previous_response_id is not supported for this model: its upstream keeps no conversation state. Send the whole conversation in input.',
      'previous_response_id',
    );
  }
  if (Array.isArray(req.tools) && req.tools.length > 0) {
    throw invalidRequest(
      'tools are not supported for this model: its upstream is reached through chat completions without tool calling.',
      'tools',
    );
  }
  const messages: ChatMessage[] = [];
  if (typeof req.instructions === 'string' && req.instructions !== '') {
    messages.push({ role: 'system', content: req.instructions });
  }
  messages.push(...inputToMessages(req.input));
  if (messages.length === 0) throw invalidRequest('input is empty: send a string or a list of messages.', 'input');

  const chat: ChatRequest = { model: req.model, messages };
  for (const [field, value] of Object.entries(req)) {
    if (!RESPONSES_FIELDS.has(field) && value !== undefined) chat[field] = value;
  }
  if (req.stream === true) {
    chat.stream = true;
    chat.stream_options = { include_usage: true };
  } else if (req.stream === false) {
    chat.stream = false;
  }
  if (typeof req.max_output_tokens === 'number') chat.max_tokens = req.max_output_tokens;
  for (const field of ['temperature', 'top_p', 'user'] as const) {
    if (req[field] != null) chat[field] = req[field];
  }
  const responseFormat = responseFormatOf(readTextConfig(req.text).format);
  if (responseFormat) chat.response_format = responseFormat;
  if (isRecord(req.reasoning) && typeof req.reasoning.effort === 'string') chat.reasoning_effort = req.reasoning.effort;
  return chat;
}

function inputToMessages(input: ResponsesRequest['input']): ChatMessage[] {
  if (typeof input === 'string') return input === '' ? [] : [{ role: 'user', content: input }];
  if (input == null) throw invalidRequest('input is required: send a string or a list of messages.', 'input');
  if (!Array.isArray(input)) throw invalidRequest('input must be a string or a list of messages.', 'input');
  return input.flatMap((item, i) => (isRecord(item) && item.type === 'reasoning' ? [] : [itemToMessage(item, i)]));
}

function itemToMessage(item: unknown, i: number): ChatMessage {
  const param = `input[${i}]`;
  if (!isRecord(item)) throw invalidRequest(`${param} must be a message object {role, content}.`, param);
  if (item.type !== undefined && item.type !== 'message') {
    throw invalidRequest(
      `${param} has type "${echoed(String(item.type))}"; this model takes message items only (no function calls or item references).`,
      `${param}.type`,
    );
  }
  const role = typeof item.role === 'string' ? INPUT_ROLES[item.role] : undefined;
  if (!role) {
    throw invalidRequest(`${param}.role must be one of user, assistant, system, developer.`, `${param}.role`);
  }
  return { role, content: contentToText(item.content, `${param}.content`) };
}

function contentToText(content: unknown, param: string): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw invalidRequest(`${param} must be a string or a list of input_text parts.`, param);
  return content
    .map((part, j) => {
      if (
        isRecord(part) &&
        typeof part.type === 'string' &&
        TEXT_PART_TYPES.has(part.type) &&
        typeof part.text === 'string'
      ) {
        return part.text;
      }
      const type = isRecord(part) ? String(part.type) : typeof part;
      throw invalidRequest(
        `${param}[${j}] has type "${echoed(type)}"; this model takes text only (input_text or output_text parts).`,
        `${param}[${j}]`,
      );
    })
    .join('\n');
}
