import type { ManagedProcess } from './managed-process';

/** Options of {@link Supervisor}; every time in ms. */
export interface SupervisorOptions {
  /** Receives one line per exit and per restart. */
  readonly log: (line: string) => void;
  /** Wait before the first restart after a crash. @defaultValue 1000 */
  readonly initialDelayMs?: number;
  /** Cap of the back-off: the wait doubles with each crash in a row, up to this. @defaultValue 30000 */
  readonly maxDelayMs?: number;
  /** A run this long resets the back-off: the next crash waits `initialDelayMs` again. @defaultValue 60000 */
  readonly stableAfterMs?: number;
}

interface Watch {
  /** Set while someone stops and starts the process on purpose (a rolling restart). */
  held: boolean;
  /** Crashes in a row. */
  crashes: number;
  startedAt: number;
  timer?: NodeJS.Timeout;
}

/**
 * Keeps the processes of the local fleet running (README "Running a fleet"): a process that exits
 * when nobody stopped it (a crash, `kill -9`, an OOM kill) is started again with the same command
 * line, after `initialDelayMs`, doubling with each crash in a row up to `maxDelayMs`. Each exit and
 * each restart is logged. {@link hold} suspends supervision of one process while it is stopped
 * and started on purpose.
 */
export class Supervisor {
  private readonly watches = new Map<ManagedProcess, Watch>();
  private readonly initialDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly stableAfterMs: number;
  private closed = false;

  constructor(private readonly options: SupervisorOptions) {
    this.initialDelayMs = options.initialDelayMs ?? 1000;
    this.maxDelayMs = options.maxDelayMs ?? 30_000;
    this.stableAfterMs = options.stableAfterMs ?? 60_000;
    if (!(this.initialDelayMs > 0 && this.maxDelayMs >= this.initialDelayMs))
      throw new Error('Supervisor: initialDelayMs must be positive and maxDelayMs at least initialDelayMs');
  }

  /** Supervises `proc` (started already) from now on. */
  watch(proc: ManagedProcess): void {
    if (this.watches.has(proc)) return;
    const watch: Watch = { held: false, crashes: 0, startedAt: Date.now() };
    this.watches.set(proc, watch);
    this.follow(proc, watch);
  }

  /**
   * Runs `work` (which stops and starts `proc` on purpose) with supervision of `proc` suspended:
   * a pending restart is cancelled, and an exit during `work` is not a crash. Afterwards `proc` is
   * supervised again, with its back-off reset.
   */
  async hold<T>(proc: ManagedProcess, work: () => Promise<T>): Promise<T> {
    const watch = this.watches.get(proc);
    if (!watch) return work();
    watch.held = true;
    clearTimeout(watch.timer);
    watch.timer = undefined;
    try {
      return await work();
    } finally {
      watch.held = false;
      watch.crashes = 0;
      watch.startedAt = Date.now();
      this.follow(proc, watch);
    }
  }

  /** Stops supervising (before the fleet stops its processes); pending restarts are cancelled. */
  close(): void {
    this.closed = true;
    for (const watch of this.watches.values()) clearTimeout(watch.timer);
  }

  /** Waits for the current run of `proc` to end, and restarts it unless that was on purpose. */
  private follow(proc: ManagedProcess, watch: Watch): void {
    if (!proc.running) return this.crashed(proc, watch, null);
    const pid = proc.pid;
    void proc.whenExited().then((code) => {
      // A newer run (started by hold) follows itself; an exit on purpose is no crash.
      if (this.closed || watch.held || proc.running || proc.lastPid !== pid) return;
      this.crashed(proc, watch, code);
    });
  }

  private crashed(proc: ManagedProcess, watch: Watch, code: number | null): void {
    if (this.closed || watch.held || watch.timer) return;
    if (Date.now() - watch.startedAt >= this.stableAfterMs) watch.crashes = 0;
    const delay = Math.min(this.initialDelayMs * 2 ** watch.crashes, this.maxDelayMs);
    watch.crashes++;
    const how = code === -1 ? 'killed by a signal' : `exit code ${code}`;
    this.options.log(`fleet: ${proc.name} exited (${how}, crash ${watch.crashes} in a row); restarting in ${delay} ms`);
    watch.timer = setTimeout(() => void this.restart(proc, watch), delay);
  }

  private async restart(proc: ManagedProcess, watch: Watch): Promise<void> {
    watch.timer = undefined;
    if (this.closed || watch.held) return;
    try {
      await proc.start();
      watch.startedAt = Date.now();
      this.options.log(`fleet: ${proc.name} restarted (pid ${proc.pid})`);
    } catch (err) {
      this.options.log(`fleet: ${proc.name} did not start again: ${(err as Error).message.split('\n')[0]}`);
      // Not ready in time but still running: stop it, so the next try starts clean.
      if (proc.running) await proc.stop('SIGKILL', 0);
    }
    this.follow(proc, watch);
  }
}
