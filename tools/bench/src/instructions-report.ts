import { MISSING_TOOLS_NOTE, type InstructionsResults } from './instructions-results';
import { fmtSpread, table } from './markdown';
import type { Spread } from './stats';

/** Syscalls named per row of the table, most calls first. */
const TOP_SYSCALLS = 8;

const inThousands = (s: Spread): Spread => ({ median: s.median / 1000, min: s.min / 1000, max: s.max / 1000, n: s.n });
const signed = (v: number) => `${v > 0 ? '+' : ''}${v.toFixed(0)}`;

/** The header of {@link instructionsRows}. */
export const INSTRUCTIONS_HEADER = [
  'target',
  'k instructions/request',
  'net of idle, k',
  '× node-floor (net)',
  'over node-floor, k (net)',
  'idle, M instructions/s',
  'syscalls/request',
  'top syscalls per request',
  'failed',
];

/**
 * The rows of the `instructions` table, one per target: k instructions per request (median (min…max)
 * over the callgrind windows), the same net of the idle background, the net median × the Node floor's
 * and over it in k, the idle rate, syscalls per request and the most frequent syscalls per request, and
 * the failed requests of every window. `—` where a figure was not measured; a failed part shows its error.
 */
export function instructionsRows(results: InstructionsResults): string[][] {
  const floor = results.rows.find((r) => r.target === 'node-floor')?.netInstructionsPerRequest;
  const base = floor?.n ? floor.median : NaN;
  return results.rows.map((row) => {
    const net = row.netInstructionsPerRequest;
    const vsFloor = net.n > 0 && Number.isFinite(base);
    const isFloor = row.target === 'node-floor';
    const sys = row.syscalls;
    return [
      row.label,
      row.instructionsPerRequest.n ? fmtSpread(inThousands(row.instructionsPerRequest), 0) : failed(row.error),
      net.n ? fmtSpread(inThousands(net), 0) : '—',
      !vsFloor ? '—' : isFloor ? '(floor)' : `${(net.median / base).toFixed(2)}×`,
      !vsFloor || isFloor ? '—' : signed((net.median - base) / 1000),
      row.idleInstructionsPerS === undefined ? '—' : (row.idleInstructionsPerS / 1e6).toFixed(2),
      sys ? sys.perRequest.toFixed(2) : failed(row.syscallError),
      sys
        ? sys.syscalls
            .slice(0, TOP_SYSCALLS)
            .map((s) => `${s.syscall} ${(s.calls / sys.requests).toFixed(2)}`)
            .join(', ')
        : '—',
      String(row.rounds.reduce((n, r) => n + r.failures, 0) + (sys?.failures ?? 0)),
    ];
  });
}

const failed = (error: string | undefined) => (error ? `failed: ${error}` : '—');

/** The `instructions` section of `latest.md`: the table, how it was measured, and what it leaves out. */
export function instructionsSection(results: InstructionsResults): string {
  const o = results.options;
  const n = (v: number) => v.toLocaleString('en-US');
  const out: string[] = [];
  if (results.missing.length) out.push(`${MISSING_TOOLS_NOTE} (not on the PATH: ${results.missing.join(', ')}).`, '');
  if (results.rows.length === 0) return out.join('\n').trim();
  out.push(table(INSTRUCTIONS_HEADER, instructionsRows(results)), '');
  out.push(
    `Instructions: user-space instructions (callgrind's \`Ir\`) the target's process executed, every thread, per request. ` +
      `\`valgrind --tool=callgrind --instr-atstart=no\` (${results.tools.valgrind ?? 'valgrind'}) runs \`node ${results.nodeArgs.join(' ')}\` ` +
      `(V8's predictable mode: no helper threads, a fixed GC schedule, so the count does not depend on how valgrind schedules threads); ` +
      `${n(o.warmupRequests)} uncounted warm-up requests in ${o.warmupLoads} loads, then ${o.rounds} window(s) of ${n(o.requests)} requests ` +
      `at c=${o.connections} (\`callgrind_control -z\`, the requests, \`-d\`), median (min…max) over the windows; ` +
      `every load opens its connections and closes them. Net of idle: each window less the instructions the process spends ` +
      `without requests (timers, background loops; an idle window of ${o.idleSeconds} s after the rounds) over the window's wall time, ` +
      'which under callgrind is tens of times the real one and grows with the load of the machine; ratios and differences are of the net medians. ' +
      'The count leaves out the kernel (syscalls, TCP on loopback, page faults), which is why the syscalls are counted too, ' +
      'and it does not weigh an instruction by its cost (cache misses, branch mispredictions). A window that holds a full garbage collection ' +
      '(mark-compact) counts more; the median of three leaves one such window out.',
  );
  out.push('');
  out.push(
    `Syscalls: a fresh process of the target with its shipped flags (no valgrind, no predictable mode), the same warm-up, then ` +
      `\`strace -f -c -p PID\` (${results.tools.strace ?? 'strace'}) attached for ${n(o.requests)} requests, every thread; ` +
      'calls per request, the most frequent named. strace stops the process at every syscall, so it has a window and a process of its own.',
  );
  out.push('');
  out.push(
    "Only the target's own process is measured: not the load generator, not the fake upstream, and for the Redis backend " +
      "(bullmq-1, one replica on the bench's redis-server) not Redis (scenario `redis-cost` counts Redis).",
  );
  return out.join('\n');
}
