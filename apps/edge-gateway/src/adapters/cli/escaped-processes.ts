import { readdir, readFile } from 'node:fs/promises';

/** Passes over `/proc` per sweep: a process found in one pass may have forked before it was killed. */
const MAX_PASSES = 3;

/** What one sweep did, for the log. */
export interface SweepResult {
  /** Runs whose survivors it looked for. */
  runs: number;
  /** Processes it killed. */
  killed: number;
  /** `/proc/<pid>/environ` files read. */
  scanned: number;
}

/** Options of an {@link EscapedProcessSweeper}. */
export interface SweeperOptions {
  /** Runs that ask within this window, in ms, share one sweep. @defaultValue 100 */
  batchMs?: number;
  /** `/proc/<pid>/environ` files read at once. @defaultValue 8 */
  readConcurrency?: number;
  /** Told after every sweep (the gateway logs it). */
  onSweep?: (result: SweepResult) => void;
}

/**
 * Kills what a CLI run left behind outside its process group (README "Adapters": what a program
 * starts never outlives its run). A process that left the group with `setsid` keeps the environment
 * it inherited, so it is found by the run's marker (`name=value` in `/proc/<pid>/environ`) wherever
 * it went, even re-parented to PID 1, and killed (`SIGKILL`, with the group it leads).
 * A sweep reads every `/proc/<pid>/environ` of the host, so it runs only when a run asks for it —
 * when something still held the run's output after the program exited and its group was killed (a
 * survivor) — never on the request path, and batched: runs that ask within `batchMs` share one
 * sweep, and a sweep reads at most `readConcurrency` files at once.
 * Where it cannot work (documented limits): no `/proc` (not Linux); a process that cleared or
 * replaced its environment (`env -i`); a process of another user (its `environ` is not readable).
 */
export class EscapedProcessSweeper {
  /** Sweeps run so far (each a scan of `/proc`). */
  sweeps = 0;
  private readonly batchMs: number;
  private readonly readConcurrency: number;
  private pending = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  /** @throws Error when `batchMs` is negative or `readConcurrency` below 1. */
  constructor(
    private readonly name: string,
    private readonly options: SweeperOptions = {},
  ) {
    this.batchMs = options.batchMs ?? 100;
    this.readConcurrency = options.readConcurrency ?? 8;
    if (!(this.batchMs >= 0)) throw new Error('batchMs must be 0 or more milliseconds');
    if (!(this.readConcurrency >= 1)) throw new Error('readConcurrency must be 1 or more');
  }

  /** Asks for the processes carrying `name=value` to be killed by the next sweep; returns at once. */
  request(value: string): void {
    this.pending.add(value);
    this.schedule();
  }

  /**
   * Runs the sweep asked for now instead of at the end of its window, and resolves once no sweep
   * is asked for or running (tests, shutdown).
   */
  async flush(): Promise<void> {
    for (;;) {
      if (this.running !== undefined) await this.running;
      else if (this.timer !== undefined) {
        clearTimeout(this.timer);
        this.timer = undefined;
        this.start();
      } else return;
    }
  }

  private schedule(): void {
    if (this.timer !== undefined || this.running !== undefined || this.pending.size === 0) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.start();
    }, this.batchMs);
    this.timer.unref();
  }

  /** Sweeps for every value asked for so far; values asked for meanwhile wait for the next sweep. */
  private start(): void {
    const values = this.pending;
    this.pending = new Set();
    this.running = this.sweep(values).finally(() => {
      this.running = undefined;
      this.schedule();
    });
  }

  private async sweep(values: ReadonlySet<string>): Promise<void> {
    this.sweeps++;
    const result: SweepResult = { runs: values.size, killed: 0, scanned: 0 };
    // A killed process may still be dying (its environ readable) in the next pass: killed once, counted once.
    const killed = new Set<number>();
    for (let pass = 0; pass < MAX_PASSES; pass++) {
      const found = await this.pass(values, result, killed);
      result.killed += found;
      if (found === 0) break;
    }
    this.options.onSweep?.(result);
  }

  /** One pass over `/proc`, skipping the pids in `killed`; @returns how many marked processes it killed. Never rejects. */
  private async pass(values: ReadonlySet<string>, result: SweepResult, killed: Set<number>): Promise<number> {
    let entries: string[];
    try {
      entries = await readdir('/proc');
    } catch {
      return 0;
    }
    const pids = entries
      .map(Number)
      .filter((pid) => Number.isInteger(pid) && pid > 1 && pid !== process.pid && !killed.has(pid));
    const prefix = Buffer.from(`\0${this.name}=`);
    let found = 0;
    let next = 0;
    const worker = async () => {
      while (next < pids.length) {
        const pid = pids[next++];
        let environ: Buffer;
        try {
          environ = Buffer.concat([Buffer.from([0]), await readFile(`/proc/${pid}/environ`)]);
        } catch {
          continue; // gone, or not ours to read
        }
        result.scanned++;
        const at = environ.indexOf(prefix);
        if (at < 0) continue;
        const start = at + prefix.length;
        const end = environ.indexOf(0, start);
        if (!values.has(environ.toString('utf8', start, end < 0 ? undefined : end))) continue;
        found++;
        killed.add(pid);
        for (const target of [-pid, pid]) {
          try {
            process.kill(target, 'SIGKILL');
          } catch {
            // ESRCH: not a group leader, or already gone.
          }
        }
      }
    };
    await Promise.all(Array.from({ length: this.readConcurrency }, worker));
    return found;
  }
}
