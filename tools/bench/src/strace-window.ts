import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { parseStraceSummary, type StraceSummary } from './strace-summary';

/** Longest wait for strace to attach to every thread, and for it to write its table once interrupted, ms. */
const STRACE_TIMEOUT_MS = 15_000;

/**
 * Counts the syscalls of process `pid` (every thread: `strace -f -c -p PID -o FILE`) while `work()`
 * runs: strace attaches first (its `Process PID attached` line), then `work()`, then SIGINT detaches
 * it and it writes its table to `file` (strace(1), options `-c`, `-f`, `-p`, `-o`). strace stops the
 * process at every syscall, so the window is slow: keep it apart from any timed or counted window.
 * @returns the parsed table and what `work` returned.
 * @throws Error when strace cannot attach (e.g. no ptrace permission), exits early, or writes no table.
 */
export async function straceWindow<T>(
  pid: number,
  file: string,
  work: () => Promise<T>,
): Promise<{ summary: StraceSummary; result: T }> {
  const strace = spawn('strace', ['-f', '-c', '-p', String(pid), '-o', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  const exited = new Promise<void>((resolve) => strace.once('exit', () => resolve()));
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`strace did not attach to ${pid}: ${stderr}`)),
        STRACE_TIMEOUT_MS,
      );
      strace.stderr.setEncoding('utf8').on('data', (chunk: string) => {
        stderr += chunk;
        if (new RegExp(`Process ${pid} attached`).test(stderr)) {
          clearTimeout(timer);
          resolve();
        }
      });
      strace.once('error', (err) => reject(new Error(`strace could not start: ${err.message}`)));
      void exited.then(() => reject(new Error(`strace exited before attaching: ${stderr.trim()}`)));
    });
    const result = await work();
    strace.kill('SIGINT');
    const timer = setTimeout(() => strace.kill('SIGKILL'), STRACE_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
    return { summary: parseStraceSummary(readFileSync(file, 'utf8')), result };
  } finally {
    if (strace.exitCode === null && strace.signalCode === null) {
      strace.kill('SIGKILL');
      await exited;
    }
  }
}
