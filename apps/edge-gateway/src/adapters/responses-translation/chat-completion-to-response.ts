import { upstreamError } from '../../errors';
import { inBandError } from './chat-stream-to-responses-stream';
import {
  buildMessageItem,
  buildResponseObject,
  isRecord,
  newId,
  statusFromFinishReason,
  usageFromChat,
  type ResponseObject,
} from './response-object';

/**
 * Translates a non-streamed chat completion (`object: "chat.completion"`, already parsed from
 * JSON) into a Response object (OpenAI API reference of both endpoints): one assistant `message`
 * item (`msg_…`) holding `choices[0].message.content` as one `output_text` part; `usage`
 * `prompt_tokens`/`completion_tokens`/`total_tokens` → `input_tokens`/`output_tokens`/`total_tokens`
 * (`null` when the upstream sent none); `created_at` is the completion's `created` (Unix seconds)
 * or now; `finish_reason: "length"` → `status: "incomplete"` with `incomplete_details.reason:
 * "max_output_tokens"`, as OpenAI reports a response cut by its token limit.
 * @param model the public model name the client asked for (not the upstream's name).
 * @throws UpstreamError 502 `upstream_error` when `chatJson` is not a chat completion with a first
 *   choice (an unrelated JSON document); an error body as {@link inBandError} says (a 4xx about the
 *   client's request is passed on).
 */
export function chatCompletionToResponse(chatJson: unknown, model: string): ResponseObject {
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
  return buildResponseObject({
    id: newId('resp_'),
    createdAt: created,
    model,
    status,
    incompleteReason,
    output: [buildMessageItem(newId('msg_'), content ?? '', status)],
    usage: usageFromChat(isRecord(chatJson) ? chatJson.usage : undefined),
  });
}
