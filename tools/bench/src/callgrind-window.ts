import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { NodeWrapper } from './bench-targets';
import { callgrindInstructions, sumCallgrindDumps } from './callgrind-summary';

/** Longest wait for valgrind's node to print its ready line, ms. */
const READY_UNDER_VALGRIND_MS = 240_000;
/** Longest wait for one `callgrind_control` command, ms (it is served when the program next polls). */
const CONTROL_TIMEOUT_MS = 60_000;

/**
 * Runs `node` under callgrind with instrumentation off until a window switches it on
 * (`--instr-atstart=no`), so start-up and warm-up run uncounted. `--smc-check=all-non-file`: V8
 * writes and rewrites its JIT code in anonymous memory, which callgrind must notice. Dumps go to
 * `dir/cg.out.<pid>.<n>` (Valgrind manual, "Callgrind: a call-graph generating cache and branch
 * prediction profiler", options `--instr-atstart`, `--callgrind-out-file`; core option `--smc-check`).
 */
export function callgrindWrapper(dir: string): NodeWrapper {
  return {
    command: 'valgrind',
    args: [
      '--tool=callgrind',
      '--instr-atstart=no',
      '--smc-check=all-non-file',
      '--dump-instr=no',
      `--callgrind-out-file=${path.join(dir, 'cg.out.%p')}`,
    ],
    readyTimeoutMs: READY_UNDER_VALGRIND_MS,
  };
}

/** `callgrind_control <args> <pid>`. @throws Error with its output when it fails or times out. */
function control(args: string[], pid: number): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('callgrind_control', [...args, String(pid)], { timeout: CONTROL_TIMEOUT_MS }, (err, stdout, stderr) => {
      if (err) reject(new Error(`callgrind_control ${args.join(' ')} ${pid}: ${err.message} ${stdout}${stderr}`));
      else resolve();
    });
  });
}

/** The dump files of process `pid` in `dir` (`cg.out.<pid>.<n>`; the one written at exit has no `.<n>`). */
function dumps(dir: string, pid: number): string[] {
  const prefix = `cg.out.${pid}.`;
  return readdirSync(dir).filter((f) => f.startsWith(prefix) && /^\d+$/.test(f.slice(prefix.length)));
}

/**
 * Switches instrumentation on for good (`callgrind_control -i on`), once the program is warm: windows
 * are then cut by zeroing and dumping alone, since a dump after instrumentation was switched off and
 * on again can carry a broken total.
 * @throws Error when `callgrind_control` fails.
 */
export function startInstrumentation(pid: number): Promise<void> {
  return control(['-i', 'on'], pid);
}

/**
 * One counted window of a program started with {@link callgrindWrapper}, instrumentation on
 * ({@link startInstrumentation}): counters zeroed (`callgrind_control -z`), `work()`, a dump (`-d`);
 * then the instructions of every dump file the window wrote (deleted once read).
 * @returns the instructions (`Ir`, user space, every thread of the process), the window's wall time
 * in s (zeroed → dumped) and what `work` returned.
 * @throws Error when a `callgrind_control` command fails or no dump with a total appears within 30 s.
 */
export async function callgrindWindow<T>(
  dir: string,
  pid: number,
  work: () => Promise<T>,
): Promise<{ instructions: number; seconds: number; result: T }> {
  const before = new Set(dumps(dir, pid));
  await control(['-z'], pid);
  const zeroedAt = performance.now();
  let result: T;
  try {
    result = await work();
  } finally {
    await control(['-d'], pid);
  }
  const seconds = (performance.now() - zeroedAt) / 1000;
  const deadline = performance.now() + 30_000;
  for (;;) {
    const fresh = dumps(dir, pid).filter((f) => !before.has(f));
    const files = fresh.map((name) => ({ name, text: readFileSync(path.join(dir, name), 'utf8') }));
    // A dump is complete once its total is in it.
    if (files.length > 0 && files.every((f) => callgrindInstructions(f.text) !== undefined)) {
      const instructions = sumCallgrindDumps(files);
      for (const f of fresh) rmSync(path.join(dir, f), { force: true });
      return { instructions, seconds, result };
    }
    if (performance.now() > deadline) throw new Error(`no complete callgrind dump of pid ${pid} in ${dir}`);
    await sleep(200);
  }
}
