import type { Response } from 'express';
import { clientClosed, shuttingDown } from '../errors';

/**
 * The abort signals of one request's upstream attempts: one AbortController per attempt, so a
 * failover starts clean. The client's disconnect aborts the current attempt with `clientClosed()`,
 * the end of the drain after SIGTERM with `shuttingDown()`; the first-byte and idle timers abort
 * their own. The queue wait shares the attempt it leads to. {@link close} removes the listeners.
 */
export class AttemptSignals {
  /** The attempt running now (or about to). */
  current = new AbortController();
  /** True once the client closed the connection before the answer finished: nothing is retried then. */
  clientGone = false;

  private readonly onClose = () => {
    if (this.res.writableFinished) return;
    this.clientGone = true;
    this.current.abort(clientClosed());
  };

  private readonly onShutdown = () => this.current.abort(shuttingDown());

  constructor(
    private readonly res: Response,
    private readonly shutdown: AbortSignal | undefined,
  ) {
    res.on('close', this.onClose);
    shutdown?.addEventListener('abort', this.onShutdown, { once: true });
  }

  /** Starts the next attempt (a failover). */
  next(): AbortController {
    this.current = new AbortController();
    return this.current;
  }

  /** Stops listening to the client and the drain; call once the request is over. */
  close(): void {
    this.res.off('close', this.onClose);
    this.shutdown?.removeEventListener('abort', this.onShutdown);
  }
}
