import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { UpstreamError, upstreamError } from '../../errors';
import { inBandError } from '../responses-translation/chat-stream-to-responses-stream';
import { isDecodeError } from './content-decoding';
import { SseFramer } from './sse-framer';
import { clientSafeCode, messageOf, tooLarge } from './upstream-errors';

/** The OpenAI stream an upstream answers: chat completion chunks, or Responses events. */
export type StreamEndpoint = 'chat' | 'responses';

/** `texts` as UTF-8 bytes, searched for in every chunk: a byte needle is not encoded again per search. */
function needles(...texts: string[]): Buffer[] {
  return texts.map((text) => Buffer.from(text, 'utf8'));
}

/** True when `bytes` holds one of `needles` (one native search each, no decoding). */
function holdsAny(bytes: Buffer, needles: readonly Buffer[]): boolean {
  for (const needle of needles) if (bytes.indexOf(needle) !== -1) return true;
  return false;
}

/** How one endpoint's stream ends when it is finished (OpenAI API reference, "Streaming"). */
const END_MARKER: Record<
  StreamEndpoint,
  { name: string; hints: readonly Buffer[]; isEnd(event: EventSourceMessage): boolean }
> = {
  chat: { name: 'data: [DONE]', hints: needles('[DONE]'), isEnd: (e) => e.data.trim() === '[DONE]' },
  responses: {
    name: 'response.completed',
    // Only a chunk that names a finishing event is parsed: the others cost one native search each.
    hints: needles('response.completed', 'response.incomplete'),
    isEnd: (e) => {
      const type = eventType(e);
      return type === 'response.completed' || type === 'response.incomplete';
    },
  },
};

/** What {@link wholeEvents} needs to know of the call. */
export interface WholeEventsOptions {
  endpoint: StreamEndpoint;
  /** The call's signal: when it fired, its reason is the stream's error. */
  signal: AbortSignal;
  /** Where the stream comes from, for the log only (`POST <redacted base_url>/chat/completions`). */
  where: string;
  /** Most bytes one unfinished event may hold (`gateway.max_response_bytes`); more is a 502, not booked. */
  maxEventBytes: number;
  /**
   * Makes an upstream's text fit for a client (`UpstreamTarget.redactForClient`: no secret the gateway
   * sent, no upstream address), applied to every chunk that may hold an error event before it is
   * passed on or read as the stream's error. @defaultValue none
   */
  redact?: (text: string) => string;
}

/** Bytes every error event holds (`"error"`, `event: error`, `response.failed`): chunks without them are passed on unread. */
const ERROR_HINTS = needles('error', 'failed');

const NO_BYTES = Buffer.alloc(0);

/**
 * An upstream's SSE answer as whole events only (README "Streaming"): each chunk yielded is one or
 * more whole events, bytes as the upstream sent them ({@link SseFramer}); an event is held until its
 * blank line arrives, and once the stream has yielded an event an empty chunk marks bytes that
 * arrived inside the next one (so idle timers see them move). How the stream may end, whatever its
 * framing (chunked, close-delimited, `Content-Length`):
 * - after its end marker (chat `data: [DONE]`; Responses `response.completed` or
 *   `response.incomplete`): finished; a read error or an unfinished event after it changes nothing;
 * - with the end marker itself cut short by the close or a read error (`data: [DONE]` with no
 *   blank line, as some servers send it): finished, the marker's blank line added;
 * - in the middle of any other event: that half event is dropped (a client never sees it) and
 *   the stream fails with a 502;
 * - after the upstream's own error event (chat `{"error": …}`, Responses `error` or
 *   `response.failed`): fails with that error ({@link inBandError}: a 4xx about the request is not
 *   the provider's fault);
 * - otherwise (no end marker): fails with a 502.
 * @throws UpstreamError 502 as above, when a read fails (reset, body cut short, undecodable
 *   `Content-Encoding`), or (not booked) when one event passes `maxEventBytes`; the signal's reason
 *   when it fired. Stopping the iteration early closes `body`.
 */
export async function* wholeEvents(
  body: AsyncIterable<Buffer>,
  opts: WholeEventsOptions,
): AsyncGenerator<Uint8Array, void, undefined> {
  const marker = END_MARKER[opts.endpoint];
  const framer = new SseFramer();
  let finished = false;
  let last: Buffer | undefined;
  let failure: unknown;
  try {
    for await (const chunk of body) {
      const pushed = framer.push(chunk);
      const whole =
        pushed !== undefined && opts.redact && holdsAny(pushed, ERROR_HINTS)
          ? Buffer.from(opts.redact(pushed.toString('utf8')))
          : pushed;
      if (framer.heldBytes > opts.maxEventBytes)
        throw tooLarge(opts.maxEventBytes, opts.where, `one stream event over ${opts.maxEventBytes} bytes`);
      if (whole !== undefined) {
        if (!finished && holdsAny(whole, marker.hints)) finished = parseEvents(whole).some(marker.isEnd);
        last = whole;
        yield whole;
      } else if (last !== undefined) yield NO_BYTES;
    }
  } catch (err) {
    if (opts.signal.aborted) throw opts.signal.reason ?? err;
    if (err instanceof UpstreamError) throw err;
    failure = err;
  }
  // After the end marker, a read error or an unfinished event loses nothing the client needs.
  if (finished) return;
  const rest = framer.rest();
  if (rest.length > 0) {
    const cut = parseEvents(Buffer.concat([rest, Buffer.from('\n\n')]));
    if (cut.length === 1 && marker.isEnd(cut[0])) {
      yield Buffer.concat([rest, Buffer.from(blankLineAfter(rest))]);
      return;
    }
  }
  if (failure !== undefined) throw streamFailure(failure, opts.where);
  if (rest.length > 0)
    throw upstreamError('The upstream stream ended in the middle of an event (the unfinished event was dropped).', {
      detail: `${opts.where}: stream ended mid-event, ${rest.length} bytes of an unfinished event dropped`,
    });
  const lastEvent = last === undefined ? undefined : parseEvents(last).at(-1);
  const reported = lastEvent === undefined ? undefined : upstreamErrorEvent(lastEvent);
  if (reported !== undefined) throw inBandError(reported);
  throw upstreamError('The upstream stream ended before it finished (its end-of-stream marker never came).', {
    detail: `${opts.where}: stream ended without ${marker.name}`,
  });
}

/** The error a failed read of the stream becomes: a `Content-Encoding` that cannot be undone, or a connection's failure. */
function streamFailure(err: unknown, where: string): UpstreamError {
  const why = clientSafeCode(err);
  if (isDecodeError(err))
    return upstreamError(`The upstream's stream could not be decoded (its Content-Encoding: ${why}).`, {
      detail: `${where}: stream not decodable: ${messageOf(err)}`,
    });
  return upstreamError(`The upstream stream failed before it finished (${why}).`, {
    detail: `${where}: stream failed: ${messageOf(err)}`,
  });
}

/** The events in `bytes` (whole events), parsed by eventsource-parser. */
function parseEvents(bytes: Buffer): EventSourceMessage[] {
  const events: EventSourceMessage[] = [];
  createParser({ onEvent: (e) => events.push(e) }).feed(bytes.toString('utf8'));
  return events;
}

/** An event's type: its `event:` field, else the `type` of its JSON data (Responses events carry both). */
function eventType(event: EventSourceMessage): string | undefined {
  if (event.event !== undefined) return event.event;
  const data = parseJson(event.data);
  const type = typeof data === 'object' && data !== null ? (data as { type?: unknown }).type : undefined;
  return typeof type === 'string' ? type : undefined;
}

/**
 * The payload of an upstream's own error event, for {@link inBandError}: chat's `data: {"error": …}`
 * or `event: error`; Responses' `error` event (`{code, message, param}`) or `response.failed`
 * (its response's `error`). Undefined for any other event.
 */
function upstreamErrorEvent(event: EventSourceMessage): unknown {
  const data = parseJson(event.data);
  const record = typeof data === 'object' && data !== null ? (data as Record<string, unknown>) : undefined;
  const type = eventType(event);
  if (type === 'response.failed') return record?.response ?? record;
  if (type === 'error') return record ?? { error: event.data };
  if (record?.error != null) return record;
  return undefined;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The line endings an event cut short by the close lacks before its blank line. */
function blankLineAfter(rest: Buffer): string {
  const text = rest.subarray(-2).toString('latin1');
  if (text.endsWith('\r\n')) return '\r\n';
  if (text.endsWith('\n')) return '\n';
  return text.endsWith('\r') ? '\r' : '\n\n';
}
