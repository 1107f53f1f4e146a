import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, fstatSync, openSync, readFileSync, readSync } from 'node:fs';
import { Readable } from 'node:stream';

/** How to start one server of the benchmark as its own OS process. */
export interface ServiceSpec {
  /** Name used in logs and errors, e.g. `gateway-memory`. */
  name: string;
  /** Executable, usually `process.execPath` (the same Node as the bench). */
  command: string;
  args: string[];
  /** Extra environment on top of the bench's own. */
  env?: Record<string, string>;
  cwd?: string;
  /**
   * The server is ready once a stdout line matches; the first capture group, when there is one,
   * is the URL it announced (so `--port 0` servers can pick their own port).
   */
  ready: RegExp;
  /** Longest wait for the ready line, in ms. @defaultValue 20000 */
  readyTimeoutMs?: number;
  /**
   * Write stdout to this file instead of a pipe, as a deployed gateway's logs would go (the ready
   * line is then read back from the file). @defaultValue a pipe the bench drains
   */
  stdoutFile?: string;
}

/** Memory figures of one process from `/proc/<pid>/status`, in bytes. */
export interface ProcessMemory {
  /** `VmRSS`: resident set now. */
  rss: number;
  /** `VmHWM`: peak resident set since the process started. */
  peakRss: number;
}

/** The kernel's `USER_HZ` (`getconf CLK_TCK`), 100 on every Linux Node runs on. */
const CLOCK_TICKS_PER_S = 100;

/** Keeps only the last `limit` characters written to it (a process's output, for error messages). */
class OutputTail {
  private text = '';

  constructor(private readonly limit = 4000) {}

  push(chunk: string): void {
    this.text = (this.text + chunk).slice(-this.limit);
  }

  toString(): string {
    return this.text;
  }
}

/** One running server process, started by `startService` and stopped by `stop()`. */
export class ServiceProcess {
  private readonly exited: Promise<number | null>;
  private exitCode: number | null | undefined;

  constructor(
    readonly name: string,
    private readonly child: ChildProcess,
    /** What the ready line announced (first capture group), or '' when the pattern has none. */
    readonly announced: string,
    private readonly tail: OutputTail,
    /** Where stdout goes when not to the bench (`ServiceSpec.stdoutFile`). */
    readonly stdoutFile?: string,
  ) {
    this.exited = new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
      else child.once('exit', (code) => resolve(code));
    });
    void this.exited.then((code) => (this.exitCode = code));
  }

  get pid(): number {
    if (this.child.pid === undefined) throw new Error(`${this.name} has no pid`);
    return this.child.pid;
  }

  /** True while the process has not exited. */
  get running(): boolean {
    return this.exitCode === undefined;
  }

  /** The last few KB the process wrote to stdout and stderr (of its log file's end when stdout goes to a file). */
  output(): string {
    if (this.stdoutFile === undefined) return this.tail.toString();
    let end = '';
    try {
      const fd = openSync(this.stdoutFile, 'r');
      try {
        const buffer = Buffer.alloc(4000);
        const n = readSync(fd, buffer, 0, buffer.length, Math.max(0, fstatSync(fd).size - buffer.length));
        end = buffer.subarray(0, n).toString('utf8');
      } finally {
        closeSync(fd);
      }
    } catch {
      // The file is gone with the bench's work directory.
    }
    return `${end}${this.tail.toString()}`;
  }

  /**
   * CPU the process has used so far, user + system, in ms (`/proc/<pid>/stat` utime + stime, at the
   * kernel's clock tick, usually 10 ms: read it around windows of seconds). @throws Error when the process is gone.
   */
  cpuMs(): number {
    const stat = readFileSync(`/proc/${this.pid}/stat`, 'utf8');
    // Fields after the `(comm)`, which may hold spaces: state is field 3, utime 14 and stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_S;
  }

  /** Reads VmRSS and VmHWM (Linux only). @throws Error when the process is gone. */
  memory(): ProcessMemory {
    const status = readFileSync(`/proc/${this.pid}/status`, 'utf8');
    return { rss: statusKb(status, 'VmRSS') * 1024, peakRss: statusKb(status, 'VmHWM') * 1024 };
  }

  /**
   * SIGTERM, then SIGKILL if it has not exited after `graceMs`. Resolves with the exit code
   * (null when killed by a signal). Safe to call twice.
   */
  async stop(graceMs = 5000): Promise<number | null> {
    if (!this.running) return this.exited;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}

function statusKb(status: string, field: string): number {
  const match = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, 'm').exec(status);
  if (!match) throw new Error(`no ${field} in /proc/<pid>/status`);
  return Number(match[1]);
}

/**
 * Spawns a server and waits for its ready line on stdout. Output keeps being drained afterwards
 * (a full pipe would block a server that logs every request) and its tail is kept for errors.
 * @throws Error with the output's tail when the process exits or stays silent past the timeout.
 */
export async function startService(spec: ServiceSpec): Promise<ServiceProcess> {
  const logFd = spec.stdoutFile === undefined ? undefined : openSync(spec.stdoutFile, 'a');
  const child = spawn(spec.command, spec.args, {
    cwd: spec.cwd,
    env: { ...process.env, ...spec.env },
    stdio: ['ignore', logFd ?? 'pipe', 'pipe'],
  });
  if (logFd !== undefined) closeSync(logFd);
  const followed = spec.stdoutFile === undefined ? undefined : followFile(spec.stdoutFile, child);
  const stdout = followed?.stream ?? child.stdout;
  const tail = new OutputTail();
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => tail.push(chunk));
  const announced = await new Promise<string>((resolve, reject) => {
    let pending = '';
    let done = false;
    const finish = (err: Error | undefined, value = '') => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (err) {
        child.kill('SIGKILL');
        reject(err);
      } else resolve(value);
      // Past the ready line a log file is only read back for errors (`output()`), not followed.
      followed?.stop();
    };
    const timeoutMs = spec.readyTimeoutMs ?? 20_000;
    const timer = setTimeout(
      () => finish(new Error(`${spec.name} did not get ready within ${timeoutMs} ms; output:\n${tail.toString()}`)),
      timeoutMs,
    );
    stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      tail.push(chunk);
      if (done) return;
      pending += chunk;
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        const match = spec.ready.exec(line);
        if (match) return finish(undefined, match[1] ?? '');
      }
    });
    child.once('error', (err) => finish(new Error(`${spec.name} could not start: ${err.message}`)));
    child.once('exit', (code, signal) =>
      finish(new Error(`${spec.name} exited (${signal ?? code}) before it was ready; output:\n${tail.toString()}`)),
    );
  });
  return new ServiceProcess(spec.name, child, announced, tail, spec.stdoutFile);
}

/**
 * What is appended to `file` while `child` runs, as a stream (polled every 50 ms until `stop()` or
 * the child's exit; the gateway's own write is a plain file write, as in production).
 */
function followFile(file: string, child: ChildProcess): { stream: Readable; stop: () => void } {
  let position = 0;
  const buffer = Buffer.alloc(64 * 1024);
  // Data is pushed by the poll below; read() has nothing to fetch.
  const stream = new Readable({ read: () => undefined });
  const poll = () => {
    const fd = openSync(file, 'r');
    try {
      for (let n; (n = readSync(fd, buffer, 0, buffer.length, position)) > 0; position += n)
        stream.push(Buffer.from(buffer.subarray(0, n)));
    } finally {
      closeSync(fd);
    }
  };
  const timer = setInterval(poll, 50);
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    clearInterval(timer);
    poll();
    stream.push(null);
  };
  child.once('exit', stop);
  return { stream, stop };
}

/** Every process the bench started, so that any exit path stops them all. */
export class ServiceSet {
  private readonly services: ServiceProcess[] = [];

  /** Starts a service and remembers it for `stopAll`. */
  async start(spec: ServiceSpec): Promise<ServiceProcess> {
    const service = await startService(spec);
    this.services.push(service);
    return service;
  }

  /** Stops one service and forgets it. */
  async stop(service: ServiceProcess): Promise<void> {
    const i = this.services.indexOf(service);
    if (i >= 0) this.services.splice(i, 1);
    await service.stop();
  }

  /** Stops every remembered service, the last started first. */
  async stopAll(): Promise<void> {
    const all = this.services.splice(0).reverse();
    await Promise.allSettled(all.map((s) => s.stop()));
  }
}
