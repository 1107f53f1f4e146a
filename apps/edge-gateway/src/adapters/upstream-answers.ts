import type { Readable } from 'node:stream';
import { upstreamClosing } from './openai-compat/half-close';

/** The body of each attempt's upstream answer, by the attempt's abort signal (one signal per attempt). */
const answers = new WeakMap<AbortSignal, Readable>();
/** The socket each attempt's request went out on, by the attempt's abort signal. */
const connections = new WeakMap<AbortSignal, object>();

/** Takes a body's failure that its reader, if any, sees anyway. */
const ignoreBodyError = (): void => undefined;

/**
 * Records the body of the upstream answer an attempt got (called by the HTTP adapters as soon as
 * the status line is in), so that the attempt's end can tell whether the gateway read it to its end.
 * The body gets an `error` listener here: an answer the gateway never starts to read (the wrong
 * kind for its endpoint, a client gone before the first read) is destroyed at the attempt's end
 * ({@link closeUnfinishedAnswer}) or by the abort, and undici's body emits `error` then; with no
 * listener that would end the process. A reader still sees every failure through its own listeners
 * or iterator.
 */
export function trackUpstreamAnswer(signal: AbortSignal, body: Readable): void {
  body.on('error', ignoreBodyError);
  answers.set(signal, body);
}

/**
 * Records the socket an attempt's request was written on (called by the HTTP adapters once the
 * request has gone out, or failed after it went out), so that the attempt's end can wait for its close.
 */
export function trackUpstreamConnection(signal: AbortSignal, socket: object): void {
  connections.set(signal, socket);
}

/**
 * Ends an attempt's upstream call (docs/architecture.md, "Invariants and their tests": a call holds its
 * slot, as the model server sees it, until the server has finished writing it or has seen the
 * connection close). An answer not read to its end — the client left, a cap was reached, the stream
 * was malformed, an error body was longer than the gateway reads — is closed here if it is still
 * open; a call the gateway cut is closed by halves (`half-close.ts`), and this waits until the
 * server has closed its side too (at most the adapter's `close_wait_ms`).
 * @returns once the call is over as the server sees it: true when the gateway cut it, false when
 *   its answer ended or it never reached a socket. Never rejects.
 */
export async function closeUnfinishedAnswer(signal: AbortSignal): Promise<boolean> {
  const body = answers.get(signal);
  const unfinished = body !== undefined && !body.readableEnded;
  if (unfinished) body.destroy();
  const socket = connections.get(signal);
  const closed = socket === undefined ? undefined : upstreamClosing(socket);
  if (closed === undefined) return unfinished;
  await closed;
  return true;
}
