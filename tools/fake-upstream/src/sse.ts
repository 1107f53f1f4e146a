import type { FakeKnobs } from './knobs';
import type { InFlightRequest } from './in-flight-request';
import { STREAM_CLIENT_ERROR, STREAM_ERROR, type OpenAIErrorBody } from './errors';

/** How one API renders its Server-Sent Events; each method returns whole events (`...\n\n`). */
export interface StreamFormat {
  /** Events before the first content chunk ('' for none). */
  open(): string;
  /** The event that carries content chunk `index` (from 0). */
  delta(piece: string, index: number): string;
  /** Events after the last content chunk, through the end marker (e.g. `data: [DONE]`). */
  close(): string;
  /** The in-band error event the stream ends with under `error_event_after`. */
  error(body: OpenAIErrorBody): string;
}

/**
 * `format`, calling `onClose` when its closing events are built: they are written at once, and only by a stream
 * that reached its end (not cut, stalled or ended by an in-band error). For the call journal's `usage`.
 */
export function reportingAtClose(format: StreamFormat, onClose: () => void): StreamFormat {
  return {
    open: () => format.open(),
    delta: (piece, index) => format.delta(piece, index),
    close: () => {
      onClose();
      return format.close();
    },
    error: (body) => format.error(body),
  };
}

/** One SSE event without an `event:` line. */
export function dataEvent(json: string): string {
  return `data: ${json}\n\n`;
}

/** One SSE event with an `event:` line, as the Responses API sends them. */
export function namedEvent(type: string, json: string): string {
  return `event: ${type}\ndata: ${json}\n\n`;
}

/**
 * Streams `pieces` as SSE: headers flushed first, each chunk written as soon as it is due
 * (`chunk_gap_ms` apart), then the closing events. `cut_after` / `error_event_after` (counted in
 * content chunks, capped at their number) end it early without the closing events; `stall_after`
 * stops sending there and holds the connection open; `done_unterminated` drops the newlines after
 * the final `data: [DONE]`. A writer that outruns its reader waits for the socket to drain, so a
 * stalled reader holds the stream (as a real server's socket would). `pacingMs[i]`, when given, is a further
 * wait before content chunk `i` (the engine model's decode time, tools/fake-upstream/README "Engine model").
 */
export async function writeEventStream(
  flight: InFlightRequest,
  headers: Record<string, string>,
  pieces: readonly string[],
  format: StreamFormat,
  knobs: FakeKnobs,
  pacingMs?: readonly number[],
): Promise<void> {
  const { res } = flight;
  res.writeHead(200, headers);
  res.flushHeaders();
  const open = format.open();
  if (open) res.write(open);
  const cutAt = knobs.cutAfter === undefined ? -1 : Math.min(knobs.cutAfter, pieces.length);
  const errorAt = knobs.errorEventAfter === undefined ? -1 : Math.min(knobs.errorEventAfter, pieces.length);
  const stallAt = knobs.stallAfter === undefined ? -1 : Math.min(knobs.stallAfter, pieces.length);
  const pad = knobs.chunkBytes > 0 ? (piece: string) => piece.padEnd(knobs.chunkBytes, '.') : (piece: string) => piece;
  for (let i = 0; i <= pieces.length; i++) {
    if (i > 0 && i < pieces.length && knobs.chunkGapMs > 0 && !(await flight.pause(knobs.chunkGapMs))) return;
    const decodeMs = i < pieces.length ? (pacingMs?.[i] ?? 0) : 0;
    if (decodeMs > 0 && !(await flight.pause(decodeMs))) return;
    if (flight.closed) return;
    if (i === cutAt) return flight.cut();
    if (i === stallAt) return;
    if (i === errorAt) {
      res.end(format.error(knobs.errorEventStatus < 500 ? STREAM_CLIENT_ERROR : STREAM_ERROR));
      return;
    }
    if (i < pieces.length && !res.write(format.delta(pad(pieces[i]), i))) {
      await new Promise<void>((resolve) => {
        const done = () => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.on('drain', done);
        res.on('close', done);
      });
    }
  }
  const close = format.close();
  res.end(knobs.doneUnterminated ? close.replace(/\n+$/, '') : close);
}
