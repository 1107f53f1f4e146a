import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BenchTarget, TargetLauncher } from './bench-targets';
import { callgrindWindow, callgrindWrapper, startInstrumentation } from './callgrind-window';
import { onPath } from './instructions-scenario';
import { runFixedLoad } from './closed-loop-load';
import { perRequest, type InstructionsRound } from './instructions-results';
import { fmtSpread, table } from './markdown';
import { CHAT_BODY, type Log } from './scenarios';
import { spread, type Spread } from './stats';

/**
 * The gateway setups whose Redis cost the scenario counts, in report order: one replica on the Redis
 * backend, pooled (nothing waits), without `gateway.clients`, with the bench's three clients (flow
 * control on), and with those clients' token budgets (`gateway-config.ts`).
 */
export const REDIS_INSTRUCTION_VARIANTS = ['pooled', 'pooled-clients', 'pooled-budgets'] as const;
export type RedisInstructionVariant = (typeof REDIS_INSTRUCTION_VARIANTS)[number];

/** Knobs of the `redis-instructions` scenario (`--instr-requests`, `--rounds`). */
export interface RedisInstructionsOptions {
  /** Requests of each callgrind window (one per round). */
  requests: number;
  /** Uncounted requests to each fresh gateway first (the scripts' first calls load and compile them). */
  warmupRequests: number;
  /** Seconds of the idle window after each variant's rounds: Redis's own background, instructions/s. */
  idleSeconds: number;
  /** Callgrind windows per variant. */
  rounds: number;
}

/** One variant: Redis's instructions per pooled request. */
export interface RedisInstructionsRow {
  variant: RedisInstructionVariant;
  rounds: InstructionsRound[];
  /** Instructions / requests per round: median and range. */
  instructionsPerRequest: Spread;
  /** Redis's instructions per second with the gateway connected and no requests (cron, renewals, liveness). */
  idleInstructionsPerS?: number;
  /** Per round, the window's instructions less the idle rate × its wall time, per request. */
  netInstructionsPerRequest: Spread;
  error?: string;
}

/** The `redis-instructions` scenario as written to `latest.json`. */
export interface RedisInstructionsResults {
  options: RedisInstructionsOptions;
  rows: RedisInstructionsRow[];
  /** Why the scenario did not run (a tool missing, Redis failed to start). */
  error?: string;
}

const firstLine = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0].slice(0, 300);

/**
 * Scenario `redis-instructions`: what a pooled request costs Redis in user-space instructions
 * (callgrind's `Ir` of the redis-server process), a count that does not move with the machine's load
 * where Redis CPU does (README "Benchmarks"). One redis-server runs under callgrind
 * (`callgrindWrapper`, instrumentation off until the first window); per variant of
 * {@link REDIS_INSTRUCTION_VARIANTS} a fresh gateway replica (not under valgrind) on it gets
 * `warmupRequests` requests, then `rounds` windows of `requests` sequential non-streamed Chat
 * Completions (one connection, so each request reaches Redis alone, as at c=1; with clients the keys
 * in turn), then an idle window of `idleSeconds` with the replica still connected.
 * @throws never: a failure is kept in the result (`error`, or a row's `error`).
 */
export async function runRedisInstructions(
  launcher: TargetLauncher,
  opts: RedisInstructionsOptions,
  workDir: string,
  log: Log,
): Promise<RedisInstructionsResults> {
  const results: RedisInstructionsResults = { options: { ...opts }, rows: [] };
  const missing = ['valgrind', 'callgrind_control'].filter((tool) => !onPath(tool));
  if (missing.length) {
    results.error = `${missing.join(' and ')} not on the PATH (Debian package valgrind)`;
    log(`redis-instructions: ${results.error}`);
    return results;
  }
  const dir = path.join(workDir, 'callgrind-redis');
  mkdirSync(dir, { recursive: true });
  let redis: Awaited<ReturnType<TargetLauncher['startRedis']>> | undefined;
  try {
    redis = await launcher.startRedis('redis-server (callgrind)', callgrindWrapper(dir));
    const pid = redis.process.pid;
    let instrumenting = false;
    for (const variant of REDIS_INSTRUCTION_VARIANTS) {
      const row: RedisInstructionsRow = {
        variant,
        rounds: [],
        instructionsPerRequest: spread([]),
        netInstructionsPerRequest: spread([]),
      };
      results.rows.push(row);
      let target: BenchTarget | undefined;
      try {
        target = await launcher.launch('bullmq-1', {
          tag: ` (redis instructions, ${variant})`,
          redisUrl: redis.url,
          clients: variant !== 'pooled',
          budgets: variant === 'pooled-budgets',
        });
        const t = target;
        const load = (amount: number) =>
          runFixedLoad({
            urls: t.urls,
            headers: t.headers,
            rotatingHeaders: t.rotatingHeaders,
            body: CHAT_BODY,
            connections: 1,
            amount,
          });
        await load(opts.warmupRequests);
        if (!instrumenting) {
          await startInstrumentation(pid);
          instrumenting = true;
        }
        for (let round = 0; round < opts.rounds; round++) {
          const { instructions, seconds, result } = await callgrindWindow(dir, pid, () => load(opts.requests));
          row.rounds.push({ requests: opts.requests, ok: result.ok, failures: result.failures, instructions, seconds });
          log(
            `  redis-instructions ${variant} round ${round + 1}/${opts.rounds}: ` +
              `${(instructions / opts.requests / 1000).toFixed(1)} k instructions/request (${seconds.toFixed(0)} s)` +
              `${result.failures ? `, failures ${result.failures}` : ''}`,
          );
        }
        const idle = await callgrindWindow(dir, pid, () => sleep(opts.idleSeconds * 1000));
        row.idleInstructionsPerS = idle.instructions / idle.seconds;
      } catch (err) {
        row.error = firstLine(err);
        log(`  redis-instructions ${variant}: ${row.error}`);
      } finally {
        if (target) await launcher.shutdown(target);
      }
      const { gross, net } = perRequest(row.rounds, row.idleInstructionsPerS);
      row.instructionsPerRequest = gross;
      row.netInstructionsPerRequest = net;
    }
  } catch (err) {
    results.error = firstLine(err);
    log(`redis-instructions: ${results.error}`);
  } finally {
    if (redis) await launcher.stopService(redis.process);
  }
  return results;
}

const thousands = (s: Spread): Spread => ({ median: s.median / 1000, min: s.min / 1000, max: s.max / 1000, n: s.n });

/**
 * The scenario's table: per variant k instructions per request (median (min…max) over the windows),
 * the same net of Redis's idle background, the net median over `pooled`'s (what clients and budgets
 * add), the idle rate and failed requests.
 */
export function redisInstructionsSection(results: RedisInstructionsResults): string {
  if (results.error) return `not measured: ${results.error}`;
  const base = results.rows.find((r) => r.variant === 'pooled')?.netInstructionsPerRequest.median ?? NaN;
  const rows = results.rows.map((r) => {
    const net = r.netInstructionsPerRequest.median;
    const over = r.variant === 'pooled' || !Number.isFinite(net - base) ? '—' : `+${((net - base) / 1000).toFixed(1)}`;
    return [
      r.variant,
      r.error && r.rounds.length === 0 ? `failed: ${r.error}` : fmtSpread(thousands(r.instructionsPerRequest), 1),
      fmtSpread(thousands(r.netInstructionsPerRequest), 1),
      over,
      r.idleInstructionsPerS === undefined ? '—' : (r.idleInstructionsPerS / 1e6).toFixed(2),
      String(r.rounds.reduce((n, round) => n + round.failures, 0)),
    ];
  });
  const o = results.options;
  return [
    table(
      [
        'variant',
        'k Redis instructions/request',
        'net of idle, k',
        'over pooled, k (net)',
        'idle, M instructions/s',
        'failed',
      ],
      rows,
    ),
    '',
    `One redis-server under callgrind (user-space instructions of its process); per variant a fresh gateway ` +
      `replica on it (not under valgrind), ${o.warmupRequests} uncounted requests, then ${o.rounds} window(s) of ` +
      `${o.requests} sequential pooled Chat Completions on one connection, then ${o.idleSeconds} s idle. ` +
      'pooled-clients: the three bench clients in turn (flow control on); pooled-budgets: the same clients with ' +
      'tokens_per_minute and tokens_per_day (docs/architecture.md, "Token budgets").',
  ].join('\n');
}
