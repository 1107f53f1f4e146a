import type { GatewayResponse } from '../http/gateway-handler';
import { clientClosed, shuttingDown } from '../errors';

/**
 * The requests running under each drain signal: one `abort` listener per signal, however many
 * requests run, instead of an EventTarget listener added and removed per request.
 */
const running = new WeakMap<AbortSignal, Set<AttemptSignals>>();

/** The requests running under `shutdown`, listening to it once (the first time it is seen). */
function runningUnder(shutdown: AbortSignal): Set<AttemptSignals> {
  let set = running.get(shutdown);
  if (set === undefined) {
    const live = new Set<AttemptSignals>();
    running.set(shutdown, live);
    shutdown.addEventListener('abort', () => [...live].forEach((a) => a.shutDown()), { once: true });
    set = live;
  }
  return set;
}

/**
 * The abort signals of one request's upstream attempts: one AbortController per attempt, so a
 * failover starts clean. The client's disconnect aborts the current attempt with `clientClosed()`,
 * the end of the drain after SIGTERM with `shuttingDown()`; the first-byte and idle timers abort
 * their own. The queue wait shares the attempt it leads to. {@link close} stops listening.
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

  /** The requests under the drain signal, this one among them until {@link close}; undefined without one. */
  private readonly drained: Set<AttemptSignals> | undefined;

  constructor(
    private readonly res: GatewayResponse,
    shutdown: AbortSignal | undefined,
  ) {
    res.on('close', this.onClose);
    // A drain already over aborts nothing more (as a listener added to an aborted signal never fires).
    this.drained = shutdown === undefined || shutdown.aborted ? undefined : runningUnder(shutdown);
    this.drained?.add(this);
  }

  /** Starts the next attempt (a failover). */
  next(): AbortController {
    this.current = new AbortController();
    return this.current;
  }

  /** The drain ran out: the running attempt ends with `shuttingDown()`. */
  shutDown(): void {
    this.current.abort(shuttingDown());
  }

  /** Stops listening to the client and the drain; call once the request is over. */
  close(): void {
    this.res.off('close', this.onClose);
    this.drained?.delete(this);
  }
}
