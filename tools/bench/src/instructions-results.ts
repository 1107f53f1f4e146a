import type { TargetId } from './target-ids';
import { spread, type Spread } from './stats';
import type { SyscallCount } from './strace-summary';

/** Knobs of the `instructions` scenario (`--instr-*` flags and `--rounds`). */
export interface InstructionsOptions {
  /** Requests of each callgrind window (one per round) and of the strace window. */
  requests: number;
  /**
   * Requests sent to a fresh target before any window, uncounted, in `warmupLoads` loads of fresh
   * connections, so the JIT has settled on the request path and on opening and closing connections.
   */
  warmupRequests: number;
  warmupLoads: number;
  /** Seconds of the idle window (no requests) that measures the process's background, instructions/s. */
  idleSeconds: number;
  /** Closed-loop keep-alive connections of every load. */
  connections: number;
  /** Callgrind windows per target, in one process, one after the other. */
  rounds: number;
}

/** One callgrind window: `requests` requests between `callgrind_control -i on` and `-d`. */
export interface InstructionsRound {
  requests: number;
  /** 2xx answers. */
  ok: number;
  /** Errors and non-2xx answers: any makes the round suspect. */
  failures: number;
  /** User-space instructions (callgrind's `Ir`) the target process executed in the window, every thread. */
  instructions: number;
  /** Wall time of the window (counters zeroed → dumped) under callgrind, s (tens of times longer than without). */
  seconds: number;
}

/** The strace window of one target: a fresh process without valgrind, `requests` requests after its warm-up. */
export interface SyscallWindow {
  requests: number;
  ok: number;
  failures: number;
  /** Syscalls of every thread of the process in the window. */
  calls: number;
  /** `calls / requests`. */
  perRequest: number;
  errors: number;
  /** Each syscall, most calls first (`strace -c` counts; its times are strace's, left out of the report). */
  syscalls: SyscallCount[];
}

/** One target of the scenario. */
export interface InstructionsRow {
  target: TargetId;
  label: string;
  rounds: InstructionsRound[];
  /** Instructions / requests per round: median and range over the rounds. */
  instructionsPerRequest: Spread;
  /** Instructions per second of the process without requests (timers, background loops), over the idle window. */
  idleInstructionsPerS?: number;
  /**
   * Per round, `(instructions − idleInstructionsPerS × seconds) / requests`: the window's instructions
   * less the background its wall time under callgrind carried, which grows with the machine's load.
   */
  netInstructionsPerRequest: Spread;
  syscalls?: SyscallWindow;
  /** Why the callgrind part failed (the row keeps the rounds it measured). */
  error?: string;
  /** Why the strace part failed. */
  syscallError?: string;
}

/** The `instructions` scenario as written to `latest.json`. */
export interface InstructionsResults {
  options: InstructionsOptions;
  /** Versions of the tools used, e.g. `valgrind-3.19.0`, `strace -- version 6.1`. */
  tools: { valgrind?: string; strace?: string };
  /** `node` flags of the processes under callgrind (V8's predictable mode). */
  nodeArgs: string[];
  /** Tools not on the PATH (their part of the scenario was not measured). */
  missing: string[];
  rows: InstructionsRow[];
}

/** What the report says when a tool is missing. */
export const MISSING_TOOLS_NOTE = 'not measured: install valgrind and strace (Debian packages)';

/**
 * Instructions per request of each round, median and range, and the same net of the idle background:
 * `(instructions − idlePerS × seconds) / requests` per round (NaN spreads when `idlePerS` is unknown).
 */
export function perRequest(
  rounds: readonly InstructionsRound[],
  idlePerS: number | undefined,
): { gross: Spread; net: Spread } {
  const idle = idlePerS ?? NaN;
  return {
    gross: spread(rounds.map((r) => r.instructions / r.requests)),
    net: spread(rounds.map((r) => (r.instructions - idle * r.seconds) / r.requests)),
  };
}
