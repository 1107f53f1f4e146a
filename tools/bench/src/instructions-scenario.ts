import { execFileSync } from 'node:child_process';
import { accessSync, constants, mkdirSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BenchTarget, TargetLauncher } from './bench-targets';
import { callgrindWindow, callgrindWrapper, startInstrumentation } from './callgrind-window';
import { runFixedLoad } from './closed-loop-load';
import {
  perRequest,
  type InstructionsOptions,
  type InstructionsResults,
  type InstructionsRow,
} from './instructions-results';
import { CHAT_BODY, type Log } from './scenarios';
import { spread } from './stats';
import { straceWindow } from './strace-window';
import { TARGET_LABELS, type TargetId } from './target-ids';

/** Targets of the scenario, in report order; `node-floor` is the base of every ratio, so it is always measured. */
export const INSTRUCTION_TARGETS: readonly TargetId[] = [
  'node-floor',
  'express-floor',
  'memory',
  'memory-warn',
  'bullmq-1',
];

/**
 * V8's predictable mode for the processes under callgrind (V8 flag `--predictable`: no background
 * threads, so compiling and collecting happen when the work calls for them rather than when valgrind,
 * which runs one thread at a time, schedules a helper; and a fixed GC schedule: 4 MB semi-spaces,
 * fixed heap growing, no memory reducer). Without it the windows after a warm-up varied by 10–20%
 * as late optimisations landed; with it, by under 1% (README "Benchmarks").
 */
export const CALLGRIND_NODE_ARGS = ['--predictable'];

/** True when `name` is an executable file in a directory of `PATH`. */
export function onPath(name: string): boolean {
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => {
    try {
      accessSync(path.join(dir, name), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** The first line `command args` prints (a version), or undefined. */
function version(command: string, args: string[]): string | undefined {
  try {
    return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
      .split('\n')[0]
      .trim();
  } catch {
    return undefined;
  }
}

const firstLine = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0].slice(0, 300);
const since = (t: number) => ((performance.now() - t) / 1000).toFixed(0);

/**
 * Scenario `instructions`: what a request costs the target process in user-space instructions and in
 * syscalls, counts that do not move with the load of the machine (README "Benchmarks"). Per target of
 * `ids` (`node-floor` always), one after the other:
 * - a process under callgrind with instrumentation off (`callgrindWrapper`, `CALLGRIND_NODE_ARGS`),
 *   `warmupRequests` requests in `warmupLoads` loads, instrumentation on, `rounds` windows of
 *   `requests` requests each (`callgrindWindow`), then an idle window of `idleSeconds` (the
 *   background, instructions/s, which the net figures take off each window's wall time);
 * - a fresh process without valgrind and with its shipped flags, the same warm-up, then one strace
 *   window of `requests` requests (`straceWindow`): syscalls per request, by syscall.
 *
 * Every load is `connections` keep-alive connections opened for it and closed after it. Only the
 * target's own process is measured: not the load generator, the fake upstream or, for `bullmq-1`,
 * Redis. A part whose tools (`valgrind` and `callgrind_control`; `strace`) are not on the PATH is left
 * out and the tool listed in `missing`; a target that fails keeps its error in its row.
 */
export async function runInstructions(
  launcher: TargetLauncher,
  ids: readonly TargetId[],
  opts: InstructionsOptions,
  workDir: string,
  log: Log,
): Promise<InstructionsResults> {
  const missing = ['valgrind', 'callgrind_control', 'strace'].filter((tool) => !onPath(tool));
  const callgrind = !missing.includes('valgrind') && !missing.includes('callgrind_control');
  const strace = !missing.includes('strace');
  const results: InstructionsResults = {
    options: { ...opts },
    tools: {
      valgrind: callgrind ? version('valgrind', ['--version']) : undefined,
      strace: strace ? version('strace', ['-V']) : undefined,
    },
    nodeArgs: CALLGRIND_NODE_ARGS,
    missing,
    rows: [],
  };
  if (missing.length) log(`instructions: not on the PATH: ${missing.join(', ')}; those parts are not measured`);
  const dir = path.join(workDir, 'callgrind');
  mkdirSync(dir, { recursive: true });
  for (const id of INSTRUCTION_TARGETS.filter((t) => t === 'node-floor' || ids.includes(t))) {
    const row: InstructionsRow = {
      target: id,
      label: TARGET_LABELS[id],
      rounds: [],
      instructionsPerRequest: spread([]),
      netInstructionsPerRequest: spread([]),
    };
    results.rows.push(row);
    if (callgrind) await countInstructions(launcher, row, opts, dir, log);
    if (strace) await countSyscalls(launcher, row, opts, workDir, log);
  }
  return results;
}

const load = (target: BenchTarget, opts: InstructionsOptions, amount: number) =>
  runFixedLoad({ urls: target.urls, headers: target.headers, body: CHAT_BODY, connections: opts.connections, amount });

/** `warmupRequests` in `warmupLoads` loads, each on connections of its own. */
async function warmUp(target: BenchTarget, opts: InstructionsOptions): Promise<void> {
  const loads = Math.max(1, Math.min(opts.warmupLoads, opts.warmupRequests));
  for (let i = 0; i < loads; i++) {
    const amount = Math.floor(opts.warmupRequests / loads) + (i < opts.warmupRequests % loads ? 1 : 0);
    if (amount > 0) await load(target, opts, amount);
  }
}

async function countInstructions(
  launcher: TargetLauncher,
  row: InstructionsRow,
  opts: InstructionsOptions,
  dir: string,
  log: Log,
): Promise<void> {
  const id = row.target;
  let target: BenchTarget | undefined;
  try {
    const startedAt = performance.now();
    target = await launcher.launch(id, {
      tag: ' (callgrind)',
      wrapper: callgrindWrapper(dir),
      nodeArgs: CALLGRIND_NODE_ARGS,
    });
    row.label = target.label;
    const t = target;
    const pid = t.processes[0].pid;
    await warmUp(t, opts);
    log(`  instructions ${id}: started and warmed up under callgrind in ${since(startedAt)} s`);
    await startInstrumentation(pid);
    for (let round = 0; round < opts.rounds; round++) {
      const { instructions, seconds, result } = await callgrindWindow(dir, pid, () => load(t, opts, opts.requests));
      row.rounds.push({ requests: opts.requests, ok: result.ok, failures: result.failures, instructions, seconds });
      log(
        `  instructions ${id} round ${round + 1}/${opts.rounds}: ${(instructions / opts.requests / 1000).toFixed(1)} k instructions/request ` +
          `(${opts.requests} requests, ${seconds.toFixed(0)} s)${result.failures ? `, failures ${result.failures}` : ''}`,
      );
    }
    // Last, once the rounds' connections are closed and their garbage collected: the steady background.
    const idle = await callgrindWindow(dir, pid, () => sleep(opts.idleSeconds * 1000));
    row.idleInstructionsPerS = idle.instructions / idle.seconds;
    log(`  instructions ${id}: idle ${(row.idleInstructionsPerS / 1e6).toFixed(2)} M instructions/s`);
  } catch (err) {
    row.error = firstLine(err);
    log(`  instructions ${id}: ${row.error}`);
  } finally {
    if (target) await launcher.shutdown(target);
  }
  const { gross, net } = perRequest(row.rounds, row.idleInstructionsPerS);
  row.instructionsPerRequest = gross;
  row.netInstructionsPerRequest = net;
}

async function countSyscalls(
  launcher: TargetLauncher,
  row: InstructionsRow,
  opts: InstructionsOptions,
  workDir: string,
  log: Log,
): Promise<void> {
  const id = row.target;
  let target: BenchTarget | undefined;
  try {
    target = await launcher.launch(id, { tag: ' (strace)' });
    row.label = target.label;
    const t = target;
    await warmUp(t, opts);
    const file = path.join(workDir, `strace-${id}.txt`);
    const { summary, result } = await straceWindow(t.processes[0].pid, file, () => load(t, opts, opts.requests));
    row.syscalls = {
      requests: opts.requests,
      ok: result.ok,
      failures: result.failures,
      calls: summary.calls,
      perRequest: summary.calls / opts.requests,
      errors: summary.errors,
      syscalls: summary.syscalls,
    };
    const top = summary.syscalls.slice(0, 4).map((s) => `${s.syscall} ${(s.calls / opts.requests).toFixed(2)}`);
    log(`  instructions ${id}: ${row.syscalls.perRequest.toFixed(2)} syscalls/request (${top.join(', ')})`);
  } catch (err) {
    row.syscallError = firstLine(err);
    log(`  instructions ${id} (strace): ${row.syscallError}`);
  } finally {
    if (target) await launcher.shutdown(target);
  }
}
