import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { UpstreamError, upstreamError } from '../../errors';
import { DEFAULT_ECHO, type ResponseEcho } from './request-echo';
import {
  buildResponseObject,
  isRecord,
  newId,
  reasoningOf,
  statusFromFinishReason,
  usageFromChat,
  type ResponseUsage,
} from './response-object';
import { StreamOutput, type Frame } from './stream-output';

/**
 * Translates a streamed chat completion (SSE `data: {chat.completion.chunk}` frames ending with
 * `data: [DONE]`) into a streamed Response (OpenAI API reference, "Streaming events"). Each
 * yielded string is one whole SSE frame `event: <type>\ndata: {"type", "sequence_number", …}\n\n`,
 * `sequence_number` counting from 0 (the frames that carry a text, {@link chatStreamToResponsesFrames},
 * decoded here to strings):
 * 1. on the first upstream event: `response.created`, `response.in_progress` (the Response echoing
 *    the request's settings, `echo`: `text.format` as asked, …);
 * 2. the output items ({@link StreamOutput}), each delta as soon as it arrives (no coalescing): a
 *    `reasoning` item for the model's reasoning (a delta's `reasoning` or `reasoning_content`,
 *    `reasoningOf`: `response.reasoning_text.delta`), then the assistant `message` item for its
 *    content (`response.output_text.delta`);
 * 3. after `[DONE]`: the closing events of the last item (and an empty message item when the
 *    model answered nothing), then `response.completed` (or `response.incomplete` when the
 *    upstream stopped on `finish_reason: "length"` / `"content_filter"`), carrying the whole
 *    Response with `usage` (reasoning tokens included when the upstream counts them) when the
 *    upstream sent a usage chunk.
 * Nothing is yielded before the upstream's first event, so a failure there is still a clean
 * error status for the client, and the gateway's time-to-first-byte bound still applies upstream.
 * Stopping the returned iterator early stops the upstream iterator (closing its connection or process).
 *
 * The closing events must each carry the whole text (the spec marks `text`, `part`, `item` and
 * `response.output` required, and OpenAI's own streams send it four times); the `openai` clients
 * take the final Response from `response.completed`. So the text (reasoning and answer) is held
 * until the end, and its size is bounded: past `maxTextBytes` (UTF-8) the stream fails with a 502
 * `upstream_error`, not booked (`responseTooLarge`), like a non-streamed answer over
 * `gateway.max_response_bytes`: the client gets the error event, the upstream is stopped, and the
 * state held stays under the cap.
 * @param chatSse the upstream body: bytes or text in any chunking, parsed with `eventsource-parser`.
 * @param model the public model name the client asked for.
 * @param maxTextBytes the most text held for the closing events, in bytes (`gateway.max_response_bytes`).
 * @param echo the request's settings the Response reports back (`echoOf`).
 * @throws UpstreamError (after or instead of frames) when the text passes `maxTextBytes` (502, not
 *   booked); when the upstream sends an error event or an `{"error": …}` payload ({@link inBandError}: a 4xx about the client's request, else 502), sends
 *   data that is not JSON or ends without `[DONE]` (502; `[DONE]` ended by the end of the stream counts);
 *   an error thrown by `chatSse` itself is rethrown as it is. No completion frame follows a failure
 *   (docs/architecture.md, "HTTP surface": a failed stream never ends cleanly).
 */
export async function* chatStreamToResponsesStream(
  chatSse: AsyncIterable<Uint8Array | string>,
  model: string,
  maxTextBytes = Infinity,
  echo: ResponseEcho = DEFAULT_ECHO,
): AsyncGenerator<string, void, undefined> {
  for await (const frame of chatStreamToResponsesFrames(chatSse, model, maxTextBytes, echo))
    yield typeof frame === 'string' ? frame : frame.toString('utf8');
}

/**
 * The frames of {@link chatStreamToResponsesStream}, as the gateway sends them: the same bytes, but
 * each closing event that carries a text (`response.output_text.done`, `response.reasoning_text.done`,
 * `response.content_part.done`, `response.output_item.done`, `response.completed` /
 * `response.incomplete`) is a Buffer of UTF-8 built from the text held once, and built only when the
 * reader asks for it (after the frame before it was taken). So the translation holds its text once
 * plus the one frame being sent (README "Streaming": the text is held for the closing events), and
 * the socket writes that Buffer without a copy, where a string frame would cost its serialization,
 * its flattening and the socket's own copy. The other frames are strings.
 */
export async function* chatStreamToResponsesFrames(
  chatSse: AsyncIterable<Uint8Array | string>,
  model: string,
  maxTextBytes = Infinity,
  echo: ResponseEcho = DEFAULT_ECHO,
): AsyncGenerator<Frame, void, undefined> {
  const responseId = newId('resp_');
  const createdAt = Math.floor(Date.now() / 1000);
  let sequenceNumber = 0;
  const frame = (type: string, fields: Record<string, unknown>): string =>
    `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequenceNumber++, ...fields })}\n\n`;
  const output = new StreamOutput(frame, maxTextBytes);

  let started = false;
  function* preamble(): Generator<string> {
    started = true;
    const inProgress = buildResponseObject({
      id: responseId,
      createdAt,
      model,
      status: 'in_progress',
      output: [],
      usage: null,
      echo,
    });
    yield frame('response.created', { response: inProgress });
    yield frame('response.in_progress', { response: inProgress });
  }

  const pending: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (event) => pending.push(event) });
  const decoder = new TextDecoder();
  let finishReason: unknown = null;
  let usage: ResponseUsage | null = null;
  let sawDone = false;

  /** The frames of the events parsed so far, up to `[DONE]`. */
  function* drain(): Generator<Frame> {
    while (pending.length > 0 && !sawDone) {
      const event = pending.shift() as EventSourceMessage;
      if (event.data.trim() === '[DONE]') {
        sawDone = true;
        break;
      }
      const data = parseEventData(event);
      if (!started) yield* preamble();
      const choice = Array.isArray(data.choices) ? data.choices[0] : undefined;
      if (isRecord(choice)) {
        if (isRecord(choice.delta)) {
          // A delta may carry both (a server that sends the reasoning's last piece with the first answer's).
          const reasoning = reasoningOf(choice.delta);
          if (reasoning !== '') yield* output.add('reasoning', reasoning);
          const content = choice.delta.content;
          if (typeof content === 'string' && content !== '') yield* output.add('message', content);
        }
        if (choice.finish_reason != null) finishReason = choice.finish_reason;
      }
      if (data.usage != null) usage = usageFromChat(data.usage) ?? usage;
    }
  }

  for await (const chunk of chatSse) {
    // After `[DONE]` the answer is read to its end, not cut: the upstream's connection stays reusable
    // and the call's slot is free at once (a cut call keeps its lease until the upstream closes its side).
    if (sawDone) continue;
    parser.feed(typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true }));
    yield* drain();
  }
  if (!sawDone) {
    // The end of the stream ends its last event too: `data: [DONE]` with no newline before the
    // close is a finished stream (servers that omit the blank line after it exist).
    parser.feed(`${decoder.decode()}\n\n`);
    yield* drain();
  }
  if (!sawDone)
    throw upstreamError('The upstream stream ended before it finished (its end-of-stream marker never came).', {
      detail: 'translated chat stream ended without data: [DONE]',
    });

  if (!started) yield* preamble();
  const { status, incompleteReason } = statusFromFinishReason(finishReason);
  const items = yield* output.finish(status);
  const response = buildResponseObject({
    id: responseId,
    createdAt,
    model,
    status,
    incompleteReason,
    output: items,
    usage,
    echo,
  });
  yield output.lastFrame(status === 'completed' ? 'response.completed' : 'response.incomplete', { response });
}

/**
 * The JSON object of one upstream chat event.
 * @throws UpstreamError for error events ({@link inBandError}) and 502 for non-JSON data.
 */
function parseEventData(event: EventSourceMessage): Record<string, unknown> {
  let data: unknown;
  try {
    data = JSON.parse(event.data);
  } catch {
    throw upstreamError('The upstream stream sent data that is not JSON.', {
      detail: `stream data is not JSON: ${event.data.slice(0, 200)}`,
    });
  }
  if (event.event === 'error' || !isRecord(data) || data.error != null) throw inBandError(data);
  return data;
}

/**
 * The error an upstream reported inside a 200 answer (an SSE error event, `{"error": …}`). One about
 * the client's request (OpenAI type `invalid_request_error`, or an HTTP status 400–499 other than
 * 429 in `status` or `code`, e.g. a context too long) is the client's answer: passed on with its
 * message, never counted against the provider (README "Provider health"). Anything else is a 502.
 */
export function inBandError(data: unknown): UpstreamError {
  const message = errorMessage(data);
  const error = isRecord(data) && isRecord(data.error) ? data.error : isRecord(data) ? data : {};
  const status = [error.status, error.code, isRecord(data) ? data.status : undefined]
    .map(Number)
    .find((n) => Number.isInteger(n) && n >= 400 && n < 600);
  const type = typeof error.type === 'string' ? error.type : undefined;
  const clientStatus =
    status !== undefined && status < 500 && status !== 429
      ? status
      : type === 'invalid_request_error'
        ? 400
        : undefined;
  if (clientStatus !== undefined) {
    const code = typeof error.code === 'string' ? error.code : 'invalid_request_error';
    const param = typeof error.param === 'string' ? error.param : null;
    const passedOn = { status: clientStatus, code, type: type ?? 'invalid_request_error', message, param };
    return new UpstreamError(passedOn, { detail: `in-band error: ${message}` });
  }
  return upstreamError('The upstream reported an error in its answer.', { detail: `in-band error: ${message}` });
}

function errorMessage(data: unknown): string {
  if (isRecord(data)) {
    const error = data.error;
    if (typeof error === 'string') return error;
    if (isRecord(error) && typeof error.message === 'string') return error.message;
    if (typeof data.message === 'string') return data.message;
  }
  return JSON.stringify(data).slice(0, 200);
}
