import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { basename } from 'node:path';
import { UpstreamError, upstreamError, upstreamTimeout } from '../../errors';
import type { Launch } from './cli-sandbox';
import type { EscapedProcessSweeper } from './escaped-processes';

/** How much of the end of stderr is kept for the error message of a failed run, in bytes. */
export const STDERR_TAIL_BYTES = 2048;
/** How many stderr lines, at most, an error message quotes. */
const STDERR_TAIL_LINES = 20;
/** stdout is paused while this many chunks wait for a reader (backpressure to the program). */
const MAX_BUFFERED_CHUNKS = 64;
/**
 * After the program exited and its group was killed, output still open this long, in ms, means a
 * survivor: a process that left the group (`setsid`) and holds the run's stdout or stderr. The run
 * then stops reading (the answer ends with what the program wrote) and asks the sweeper to find
 * the survivor by the run's marker ({@link EscapedProcessSweeper}); the answer does not wait for that.
 */
export const SURVIVOR_WAIT_MS = 1000;

/** What one run of a CLI model needs. */
export interface CliProcessOptions {
  /**
   * What to spawn: the program and its arguments, passed to the OS as they are, never through a
   * shell, or the sandbox wrapping them (`CliSandbox.launch`).
   */
  launch: Launch;
  /** The program (`command[0]`), named by its base name in error messages. */
  program: string;
  /** Sweeps for processes that survived the run outside its group. */
  sweeper: EscapedProcessSweeper;
  /** Written to the program's stdin, which is then closed. */
  stdin: string;
  /** The whole run (start to exit) may last this long, in ms, then the process group is killed. */
  timeoutMs: number;
  /** Aborting it (client disconnect) kills the process group at once. */
  signal: AbortSignal;
  /**
   * The program's whole environment (README "Adapters": the adapter's `env` over a small base);
   * nothing of the gateway's own environment is added, except the run marker {@link RUN_MARKER}.
   */
  env: Readonly<Record<string, string>>;
  /** The adapter's id, named in the timeout message. */
  adapterId: string;
}

/**
 * Environment variable set on every run to a value of its own: whatever the program starts inherits
 * it, so a process that left the run's process group (`setsid`) and survived the run is still found
 * and killed ({@link EscapedProcessSweeper}).
 */
export const RUN_MARKER = 'IOP_EDGE_CLI_RUN';

/**
 * The 504 of a run that outlived its adapter's `timeout_ms` (README "Adapters"). The message names
 * only the setting and the adapter id, so it is shown to the client as it is (with `detail`).
 */
export function cliTimeout(adapterId: string, ms: number): UpstreamError {
  return upstreamTimeout({ wait: 'cli_run', ms, adapter: adapterId });
}

/**
 * One run of a command-line program wrapped as a model (`type: cli`, README "Pooled and direct routes").
 * What it spawns ({@link CliProcessOptions.launch}: the program, or bwrap around it) starts in its
 * own process group (`detached: true`) so that every kill — timeout, abort, {@link kill}, and the
 * clean-up after the program exits — is `SIGKILL` to the whole group (`-pid`). In the bwrap sandbox
 * that ends the run's PID namespace, and with it every process the program started. Without it, a
 * process that left the group (`setsid`) and still holds the run's output {@link SURVIVOR_WAIT_MS}
 * after the exit is a survivor: the run asks the sweeper to find it by its {@link RUN_MARKER} (Linux,
 * through `/proc`), off the request path. Node reaps the spawned process itself, so no zombie is left.
 * stdout is read as UTF-8 text chunks through {@link read}; the end of stderr is kept for errors.
 */
export class CliProcess {
  /**
   * The pid of what was spawned (the program, or bwrap around it), also its process group id;
   * `undefined` when it could not start.
   */
  readonly pid: number | undefined;
  /** Resolves once the program has exited and its output is closed; never rejects. */
  readonly closed: Promise<void>;

  private readonly child: ChildProcessWithoutNullStreams;
  private readonly chunks: string[] = [];
  private wake: (() => void) | undefined;
  private hasClosed = false;
  private failure: { error: unknown } | undefined;
  private spawnError: NodeJS.ErrnoException | undefined;
  private stderrTail: Buffer = Buffer.alloc(0);
  private readonly timer: NodeJS.Timeout;
  private readonly onAbort = () => this.fail(this.options.signal.reason ?? new Error('The request was aborted.'));
  private readonly marker = `${process.pid}.${randomBytes(8).toString('hex')}`;
  private survivorTimer: NodeJS.Timeout | undefined;

  /** Starts the program at once. */
  constructor(private readonly options: CliProcessOptions) {
    const program = options.program;
    const env = { ...options.env, [RUN_MARKER]: this.marker };
    this.child = spawn(options.launch.file, options.launch.args, {
      detached: true,
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
      shell: false,
      windowsHide: true,
    });
    this.pid = this.child.pid;

    this.child.stdout.setEncoding('utf8');
    this.child.stdout.on('data', (text: string) => {
      if (text === '') return;
      this.chunks.push(text);
      if (this.chunks.length >= MAX_BUFFERED_CHUNKS) this.child.stdout.pause();
      this.notify();
    });
    this.child.stderr.on('data', (bytes: Buffer) => {
      const joined = Buffer.concat([this.stderrTail, bytes]);
      this.stderrTail = joined.subarray(Math.max(0, joined.length - STDERR_TAIL_BYTES));
    });
    // A program that exits without reading its stdin makes the write fail with EPIPE: not an error of the run.
    this.child.stdin.on('error', () => undefined);
    this.child.on('error', (err: NodeJS.ErrnoException) => {
      this.spawnError ??= err;
    });
    this.child.on('exit', () => {
      // Whatever the program left running in its group goes with it.
      this.killGroup();
      this.survivorTimer = setTimeout(() => {
        options.sweeper.request(this.marker);
        this.child.stdout.destroy();
        this.child.stderr.destroy();
      }, SURVIVOR_WAIT_MS);
    });
    this.closed = new Promise((resolve) => {
      this.child.on('close', (code: number | null, signal: NodeJS.Signals | null) => {
        this.hasClosed = true;
        clearTimeout(this.timer);
        clearTimeout(this.survivorTimer);
        options.signal.removeEventListener('abort', this.onAbort);
        if (!this.failure) {
          if (this.spawnError) {
            this.failure = {
              error: upstreamError(
                `The CLI model "${basename(program)}" could not be started (${this.spawnError.code ?? this.spawnError.message}); check its command in edge.yaml.`,
              ),
            };
          } else if (code !== 0) {
            this.failure = { error: upstreamError(this.exitMessage(program, code, signal)) };
          }
        }
        this.notify();
        resolve();
      });
    });

    this.timer = setTimeout(() => this.fail(cliTimeout(options.adapterId, options.timeoutMs)), options.timeoutMs);
    options.signal.addEventListener('abort', this.onAbort, { once: true });
    if (options.signal.aborted) this.onAbort();
    this.child.stdin.end(options.stdin);
  }

  /**
   * The next stdout chunk (a non-empty string) as soon as the program writes it, or `null` once
   * it has exited with code 0 and every chunk was read.
   * @throws UpstreamError 504 `upstream_timeout` when the run outlived `timeoutMs`; the abort
   *   reason when `signal` fired; UpstreamError 502 `upstream_error` when the program could not
   *   start or exited with a non-zero code or a signal (the message names the code and quotes
   *   the last stderr lines). A failure is thrown even when chunks are still unread.
   */
  async read(): Promise<string | null> {
    for (;;) {
      if (this.failure) throw this.failure.error;
      const chunk = this.chunks.shift();
      if (chunk !== undefined) {
        if (this.chunks.length < MAX_BUFFERED_CHUNKS / 2 && this.child.stdout.isPaused()) this.child.stdout.resume();
        return chunk;
      }
      if (this.hasClosed) return null;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  /** Kills the process group (`SIGKILL`) unless the run is over; `read` then throws. */
  kill(): void {
    this.fail(upstreamError('The CLI model was stopped by the gateway.'));
  }

  /** Kills the process group (`SIGKILL`) unless the run is over; `read` then throws `error`. */
  fail(error: unknown): void {
    if (this.hasClosed) return;
    this.failure ??= { error };
    this.killGroup();
    this.notify();
  }

  private killGroup(): void {
    if (this.hasClosed || this.pid === undefined) return;
    try {
      process.kill(-this.pid, 'SIGKILL');
    } catch {
      // ESRCH: the group is already gone. Nothing else can be done from an event handler.
    }
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private exitMessage(program: string, code: number | null, signal: NodeJS.Signals | null): string {
    const how = code !== null ? `exited with code ${code}` : `was killed by ${signal ?? 'a signal'}`;
    const lines = this.stderrTail.toString('utf8').trim().split(/\r?\n/).slice(-STDERR_TAIL_LINES).join('\n');
    return `The CLI model "${basename(program)}" ${how}${lines ? `; the end of its stderr:\n${lines}` : ' and wrote nothing to stderr'}.`;
  }
}
