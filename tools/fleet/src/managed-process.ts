import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';

/** How to run one process of the fleet. */
export interface ProcessSpec {
  /** Short name for messages and the log file (`<logDir>/<name>.log`). */
  name: string;
  command: string;
  args: string[];
  env?: Record<string, string | undefined>;
  cwd?: string;
  /** Ready once a line of stdout or stderr matches; without it, ready once spawned. */
  ready?: RegExp;
  /** Append stdout and stderr here. */
  logFile?: string;
  /** Longest wait for `ready`, in ms. @defaultValue 20000 */
  readyTimeoutMs?: number;
}

/**
 * A child process that can be stopped and started again with the same command line (a replica of
 * a rolling update keeps its port). Keeps the last 8 KiB of output for error messages.
 */
export class ManagedProcess {
  private child?: ChildProcess;
  private exited?: Promise<number | null>;
  private tail = '';
  private log?: WriteStream;

  constructor(readonly spec: ProcessSpec) {}

  get name(): string {
    return this.spec.name;
  }

  get pid(): number | undefined {
    return this.running ? this.child?.pid : undefined;
  }

  /** The pid of the latest run, running or not (to tell one run from the next). */
  get lastPid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return !!this.child && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The last output lines (stdout and stderr), for failure messages. */
  output(): string {
    return this.tail;
  }

  /**
   * Spawns the process and resolves once it is ready.
   * @throws Error with its last output when it exits first or is not ready in time.
   */
  async start(): Promise<void> {
    if (this.running) throw new Error(`${this.name} is already running`);
    const { spec } = this;
    this.log ??= spec.logFile ? createWriteStream(spec.logFile, { flags: 'a' }) : undefined;
    const child = spawn(spec.command, spec.args, {
      cwd: spec.cwd,
      env: { ...process.env, ...spec.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? (signal ? -1 : null))));
    const spawned = new Promise<void>((resolve, reject) => {
      child.once('spawn', () => resolve());
      child.once('error', (err: NodeJS.ErrnoException) =>
        reject(err.code === 'ENOENT' ? new Error(`${spec.command} not found (${this.name})`) : err),
      );
    });
    let seen = '';
    const ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${this.name} was not ready within ${spec.readyTimeoutMs ?? 20000} ms:\n${this.tail}`)),
        spec.readyTimeoutMs ?? 20000,
      );
      const onData = (chunk: Buffer) => {
        const text = chunk.toString();
        this.tail = (this.tail + text).slice(-8192);
        this.log?.write(text);
        if (!spec.ready) return;
        seen = (seen + text).slice(-4096);
        if (spec.ready.test(seen)) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      void this.exited!.then((code) => {
        clearTimeout(timer);
        reject(new Error(`${this.name} exited (${code}) before it was ready:\n${this.tail}`));
      });
      if (!spec.ready)
        void spawned.then(
          () => (clearTimeout(timer), resolve()),
          () => undefined,
        );
    });
    await spawned;
    await ready;
  }

  /**
   * Sends `signal` and waits for the exit; SIGKILL after `killAfterMs`. Resolves to the exit code
   * (-1 when a signal ended it); a process that is not running resolves at once.
   */
  async stop(signal: NodeJS.Signals = 'SIGTERM', killAfterMs = 45_000): Promise<number | null> {
    const child = this.child;
    if (!child || !this.exited) return null;
    if (this.running) child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  /** The exit of the current run (resolves at once when it already exited). */
  whenExited(): Promise<number | null> {
    return this.exited ?? Promise.resolve(null);
  }

  /** Closes the log file; call once the process has stopped for good. */
  closeLog(): void {
    this.log?.end();
    this.log = undefined;
  }
}
