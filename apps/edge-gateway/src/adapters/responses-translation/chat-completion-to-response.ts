import { upstreamError } from '../../errors';
import { inBandError } from './chat-stream-to-responses-stream';
import { DEFAULT_ECHO, type ResponseEcho } from './request-echo';
import {
  buildMessageItem,
  buildReasoningItem,
  buildResponseObject,
  isRecord,
  newId,
  reasoningOf,
  statusFromFinishReason,
  usageFromChat,
  type OutputItem,
  type ResponseObject,
} from './response-object';

/**
 * Translates a non-streamed chat completion (`object: "chat.completion"`, already parsed from
 * JSON) into a Response object (OpenAI API reference of both endpoints): when the message carries
 * the model's reasoning (`reasoning` or `reasoning_content`, {@link reasoningOf}), a `reasoning`
 * item (`rs_…`) holding it as one `reasoning_text` part comes first; then one assistant `message`
 * item (`msg_…`) holding `choices[0].message.content` as one `output_text` part; `usage`
 * `prompt_tokens`/`completion_tokens`/`total_tokens` → `input_tokens`/`output_tokens`/`total_tokens`,
 * `completion_tokens_details.reasoning_tokens` → `output_tokens_details.reasoning_tokens`
 * (`null` when the upstream sent none); `created_at` is the completion's `created` (Unix seconds)
 * or now; `finish_reason: "length"` → `status: "incomplete"` with `incomplete_details.reason:
 * "max_output_tokens"`, as OpenAI reports a response cut by its token limit (a reasoning item with
 * no answer after it is then `incomplete` too).
 * @param model the public model name the client asked for (not the upstream's name).
 * @param echo the request's settings the Response reports back (`echoOf`): `text.format` as asked, ….
 * @throws UpstreamError 502 `upstream_error` when `chatJson` is not a chat completion with a first
 *   choice (an unrelated JSON document); an error body as {@link inBandError} says (a 4xx about the
 *   client's request is passed on).
 */
export function chatCompletionToResponse(
  chatJson: unknown,
  model: string,
  echo: ResponseEcho = DEFAULT_ECHO,
): ResponseObject {
  if (isRecord(chatJson) && chatJson.error != null) throw inBandError(chatJson);
  const choice = isRecord(chatJson) && Array.isArray(chatJson.choices) ? chatJson.choices[0] : undefined;
  if (!isRecord(choice) || !isRecord(choice.message)) {
    const detail = `not a chat completion: ${JSON.stringify(chatJson)?.slice(0, 300)}`;
    throw upstreamError('The upstream answered with something other than a chat completion (no choices[0].message).', {
      detail,
    });
  }
  const content = choice.message.content;
  if (content != null && typeof content !== 'string') {
    throw upstreamError('The upstream answered a chat completion whose choices[0].message.content is not text.', {
      detail: 'chat completion content is not text',
    });
  }
  const { status, incompleteReason } = statusFromFinishReason(choice.finish_reason);
  const created =
    isRecord(chatJson) && typeof chatJson.created === 'number' ? chatJson.created : Math.floor(Date.now() / 1000);
  const output: OutputItem[] = [];
  const reasoning = reasoningOf(choice.message);
  if (reasoning !== '') output.push(buildReasoningItem(newId('rs_'), reasoning, content ? 'completed' : status));
  output.push(buildMessageItem(newId('msg_'), content ?? '', status));
  return buildResponseObject({
    id: newId('resp_'),
    createdAt: created,
    model,
    status,
    incompleteReason,
    output,
    usage: usageFromChat(isRecord(chatJson) ? chatJson.usage : undefined),
    echo,
  });
}
