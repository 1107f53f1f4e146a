import type { Readable } from 'node:stream';

/** The body of each attempt's upstream answer, by the attempt's abort signal (one signal per attempt). */
const answers = new WeakMap<AbortSignal, Readable>();

/**
 * Records the body of the upstream answer an attempt got (called by the HTTP adapters as soon as
 * the status line is in), so that the attempt's end can tell whether the gateway read it to its end.
 */
export function trackUpstreamAnswer(signal: AbortSignal, body: Readable): void {
  answers.set(signal, body);
}

/**
 * Ends an attempt's upstream answer (docs/architecture.md, "Invariants and their tests": a call holds its slot,
 * as the model server sees it, until the server has finished writing it or has seen the connection
 * close). An answer not read to its end — the client left, a cap was reached, the stream was
 * malformed, an error body was longer than the gateway reads — is closed here if it is still open.
 * @returns true when the answer was not read to its end (the gateway cut the call, or the upstream
 *   broke it), so the caller keeps the lease a settle delay longer; false when it ended or when no
 *   answer came (the call never got a status line).
 */
export function closeUnfinishedAnswer(signal: AbortSignal): boolean {
  const body = answers.get(signal);
  if (body === undefined || body.readableEnded) return false;
  body.destroy();
  return true;
}
