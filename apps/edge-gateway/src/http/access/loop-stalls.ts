import { performance } from 'node:perf_hooks';

/**
 * Runs `fn` once the event loop has run at least one whole poll phase (the phase that accepts
 * connections and reads sockets) after this call, whatever phase it is called from: an immediate
 * queued from within another immediate runs in the next turn's check phase, which follows that
 * turn's poll phase (Node.js "The Node.js Event Loop" guide; libuv's loop order).
 */
export function afterAPoll(fn: () => void): void {
  setImmediate(() => setImmediate(fn));
}

/**
 * Notices that the process's event loop stalled: it was stopped (SIGSTOP, a paused container, a
 * debugger), starved of CPU, or held by a long synchronous task or GC pause. During a stall the
 * kernel still accepts connections and buffers what clients send, and on resuming Node runs the
 * timers that expired meanwhile before it reads any socket. So right after a stall a connection that
 * looks idle or slow may have its request waiting unread, and a close decided then would cut it
 * (README "Security", row "slow or many clients": only connections that are really idle or slow
 * are closed).
 *
 * A stall is a gap of more than `stallMs` between two samples of the monotonic clock
 * (`performance.now()`, unaffected by wall-clock changes, running on while the process is stopped);
 * samples come from a heartbeat every `intervalMs` while {@link LoopStalls.start}ed, and from every
 * {@link LoopStalls.settling} call. After one, {@link LoopStalls.settling} is true until the loop
 * has run a whole poll phase, which reads what the sockets hold ({@link afterAPoll}).
 */
export class LoopStalls {
  /** The last sample, in ms of `performance.now()`. */
  private last = performance.now();
  private settlingTurn = false;
  private heartbeat: NodeJS.Timeout | undefined;

  /**
   * @param intervalMs the heartbeat's period, in ms
   * @param stallMs the longest gap between two samples that is not a stall, in ms (above `intervalMs`)
   */
  constructor(
    private readonly intervalMs: number,
    private readonly stallMs: number,
  ) {}

  /** Starts the heartbeat (unref'd: it keeps no process alive); again is a no-op. */
  start(): void {
    if (this.heartbeat) return;
    this.last = performance.now();
    this.heartbeat = setInterval(() => this.sample(), this.intervalMs);
    this.heartbeat.unref();
  }

  /** Stops the heartbeat. */
  stop(): void {
    clearInterval(this.heartbeat);
    this.heartbeat = undefined;
  }

  /**
   * True when the loop has stalled and not yet run the turn that reads the sockets: a connection
   * must not be judged idle or slow now, only one turn later.
   */
  settling(): boolean {
    this.sample();
    return this.settlingTurn;
  }

  private sample(): void {
    const now = performance.now();
    const gap = now - this.last;
    this.last = now;
    if (gap <= this.stallMs || this.settlingTurn) return;
    this.settlingTurn = true;
    afterAPoll(() => (this.settlingTurn = false));
  }
}
