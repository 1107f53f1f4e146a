import { upstreamError } from '../../errors';
import type { ChatRequest, DispatchContext, ResponsesRequest, UpstreamResponse } from '../adapter';
import { chatCompletionToResponse } from './chat-completion-to-response';
import { chatStreamToResponsesFrames } from './chat-stream-to-responses-stream';
import { echoOf } from './request-echo';
import { responsesToChat } from './responses-to-chat';

/** The chat side of an adapter: `Adapter.chat` for an upstream without `/v1/responses`. */
export type ChatCall = (req: ChatRequest, ctx: DispatchContext) => Promise<UpstreamResponse>;

/**
 * Serves a Responses API call through an upstream that only speaks chat completions (README "Adapters"):
 * the request goes through {@link responsesToChat}, then `chat`, and its answer comes back as a
 * Response — a JSON chat completion through {@link chatCompletionToResponse}, an SSE chat stream
 * through {@link chatStreamToResponsesFrames}, its text held once up to `ctx.maxResponseBytes` — named
 * after the public model `req.model` and echoing the request's settings (`echoOf`: `text.format`
 * as asked, `instructions`, `reasoning`, sampling and length settings).
 * @throws ApiError 400 from the request translation; whatever `chat` throws, unchanged;
 *   UpstreamError 502 when the chat answer is not JSON or not a chat completion.
 */
export async function responsesViaChat(
  req: ResponsesRequest,
  ctx: DispatchContext,
  chat: ChatCall,
): Promise<UpstreamResponse> {
  const chatReq = responsesToChat(req);
  const echo = echoOf(req);
  const upstream = await chat(chatReq, ctx);
  if (upstream.kind === 'sse') {
    // The text the closing events carry is held up to gateway.max_response_bytes (README "Streaming").
    const body = chatStreamToResponsesFrames(upstream.body, req.model, ctx.maxResponseBytes, echo);
    return { kind: 'sse', status: upstream.status, body };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(typeof upstream.body === 'string' ? upstream.body : new TextDecoder().decode(upstream.body));
  } catch {
    throw upstreamError('The upstream answered a chat completion that is not JSON.', {
      detail: 'chat completion is not JSON',
    });
  }
  return {
    kind: 'json',
    status: upstream.status,
    body: JSON.stringify(chatCompletionToResponse(parsed, req.model, echo)),
  };
}
