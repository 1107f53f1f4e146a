import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { UpstreamError, upstreamError } from '../../errors';
import { isDecodeError } from './content-decoding';
import { clientSafeCode, messageOf } from './upstream-errors';

/*
 * How an upstream's SSE stream ends, and what its events say when it fails: the rules
 * `whole-events.ts` applies (docs/architecture.md, "HTTP surface": whole events only; OpenAI API reference,
 * "Streaming").
 */

/** The OpenAI stream an upstream answers: chat completion chunks, or Responses events. */
export type StreamEndpoint = 'chat' | 'responses';

/** `texts` as UTF-8 bytes, searched for in every chunk: a byte needle is not encoded again per search. */
function needles(...texts: string[]): Buffer[] {
  return texts.map((text) => Buffer.from(text, 'utf8'));
}

/** True when `bytes` holds one of `needles` (one native search each, no decoding). */
export function holdsAny(bytes: Buffer, needles: readonly Buffer[]): boolean {
  for (const needle of needles) if (bytes.indexOf(needle) !== -1) return true;
  return false;
}

/** How one endpoint's stream ends when it is finished (OpenAI API reference, "Streaming"). */
export const END_MARKER: Record<
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

/** Bytes every error event holds (`"error"`, `event: error`, `response.failed`): chunks without them are passed on unread. */
export const ERROR_HINTS = needles('error', 'failed');

/** What a body closed before its end, with no error of its own, fails with (as node's stream helpers name it). */
export function prematureClose(): Error {
  return Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });
}

/** The error a failed read of the stream becomes: a `Content-Encoding` that cannot be undone, or a connection's failure. */
export function streamFailure(err: unknown, where: string): UpstreamError {
  const why = clientSafeCode(err);
  if (isDecodeError(err))
    return upstreamError(`The upstream's stream could not be decoded (its Content-Encoding: ${why}).`, {
      detail: `${where}: stream not decodable: ${messageOf(err)}`,
    });
  return upstreamError(`The upstream stream failed before it finished (${why}).`, {
    detail: `${where}: stream failed: ${messageOf(err)}`,
  });
}

/** The events in `bytes` (whole events, any line endings), parsed by eventsource-parser. */
export function parseEvents(bytes: Buffer | string): EventSourceMessage[] {
  const events: EventSourceMessage[] = [];
  const text = typeof bytes === 'string' ? bytes : bytes.toString('utf8');
  // Whole events end on a blank line; one ended by a lone CR is held by the parser in case an LF
  // follows (CRLF), so an LF is added: the CR then ends its line, as it does in the stream.
  createParser({ onEvent: (e) => events.push(e) }).feed(text.endsWith('\r') ? `${text}\n` : text);
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
export function upstreamErrorEvent(event: EventSourceMessage): unknown {
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
export function blankLineAfter(rest: Buffer): string {
  const text = rest.subarray(-2).toString('latin1');
  if (text.endsWith('\r\n')) return '\r\n';
  if (text.endsWith('\n')) return '\n';
  return text.endsWith('\r') ? '\r' : '\n\n';
}
