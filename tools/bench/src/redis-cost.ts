import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BenchTarget, TargetLauncher } from './bench-targets';
import { runFixedLoad } from './closed-loop-load';
import { BENCH_MAX_CONCURRENCY } from './gateway-config';
import { CHAT_BODY, type Log } from './scenarios';
import { RedisStatsReader, type RedisDelta, type RedisSnapshot } from './redis-stats';
import { spread } from './stats';
import {
  FLOOR_ROUND_TRIPS,
  isContended,
  type RedisCostOptions,
  type RedisCostResults,
  type RedisCostRound,
  type RedisCostRun,
  type RedisCostVariant,
  type RedisIdleRun,
} from './redis-cost-results';
export * from './redis-cost-results';

const REPLICA_SETS = [1, 3] as const;

/**
 * Scenario "redis-cost": what the Redis backend costs Redis. A redis-server of its own (so its
 * counters and CPU belong to this scenario alone), 1 and then 3 gateway replicas on it, in front
 * of the shared fake upstream. Per replica set: a warm-up, `idleSeconds` without traffic (the
 * background: liveness, sweep, health probes), then `rounds` × `requests` pooled non-streamed
 * requests at `concurrency`; then a fresh set whose provider has `contendedMaxConcurrency` slots
 * under `contendedConcurrency` connections, so most requests queue. Both again with
 * `gateway.clients` configured (`-clients`: flow control on), and pooled once more with token budgets
 * on those clients (`pooled-budgets`). Last, the round-trip floor (`floor`): the bare Node proxy
 * making two `PING`s per request on one connection, at the same concurrencies as the pooled runs.
 * `INFO commandstats` and `INFO cpu` are read around every window.
 */
export async function runRedisCost(
  launcher: TargetLauncher,
  opts: RedisCostOptions,
  log: Log,
): Promise<RedisCostResults> {
  const results: RedisCostResults = {
    redisVersion: 'unknown',
    loadAvg: [os.loadavg()[0], NaN],
    options: { ...opts },
    idle: [],
    runs: [],
  };
  const redis = await launcher.startRedis('redis-server (cost)');
  const reader = new RedisStatsReader(redis.url);
  try {
    await reader.connect();
    results.redisVersion = await reader.version();
    for (const variant of [
      'pooled',
      'contended',
      'pooled-clients',
      'contended-clients',
      'pooled-budgets',
      'floor',
    ] as const) {
      // The floor is one connection, as one replica's.
      for (const replicas of variant === 'floor' ? [1] : REPLICA_SETS) {
        // The floor's background is Redis's own cron alone: it is measured apart and not kept as a replica set's.
        const idle = variant === 'floor' ? undefined : results.idle.find((r) => r.replicas === replicas);
        // A queued request is compared with a pooled one (of the same client setting) at the highest load measured.
        const base = variant === 'pooled' || variant === 'contended' ? 'pooled' : 'pooled-clients';
        const pooled = results.runs
          .filter((r) => r.variant === base && r.replicas === replicas && r.netCommandsPerRequest.n > 0)
          .at(-1);
        const set = await measureSet(launcher, reader, redis.url, variant, replicas, opts, log, idle, pooled);
        if (set.idle && variant !== 'floor') results.idle.push(set.idle);
        results.runs.push(...set.runs);
      }
    }
  } catch (err) {
    results.error = (err as Error).message;
    log(`redis-cost: ${results.error}`);
  } finally {
    reader.close();
    await launcher.stopService(redis.process);
    results.loadAvg[1] = os.loadavg()[0];
  }
  return results;
}

async function measureSet(
  launcher: TargetLauncher,
  reader: RedisStatsReader,
  redisUrl: string,
  variant: RedisCostVariant,
  replicas: number,
  opts: RedisCostOptions,
  log: Log,
  knownIdle: RedisIdleRun | undefined,
  pooled: RedisCostRun | undefined,
): Promise<{ idle?: RedisIdleRun; runs: RedisCostRun[] }> {
  const contended = isContended(variant);
  const maxConcurrency = contended ? opts.contendedMaxConcurrency : undefined;
  const concurrencies = contended ? [opts.contendedConcurrency] : [...opts.concurrency].sort((a, b) => a - b);
  const runs: RedisCostRun[] = concurrencies.map((concurrency) => ({
    variant,
    replicas,
    maxConcurrency: maxConcurrency ?? BENCH_MAX_CONCURRENCY,
    concurrency,
    rounds: [],
    commandsPerRequest: spread([]),
    netCommandsPerRequest: spread([]),
    cpuMsPerRequest: spread([]),
    netCpuMsPerRequest: spread([]),
    rps: spread([]),
    breakdown: [],
    failures: 0,
  }));
  let target: BenchTarget | undefined;
  let idle = knownIdle;
  let measuredIdle: RedisIdleRun | undefined;
  let current: RedisCostRun | undefined;
  try {
    target =
      variant === 'floor'
        ? await launcher.launch('node-floor', { tag: ' (cost, floor)', redisUrl, redisRoundTrips: FLOOR_ROUND_TRIPS })
        : await launcher.launch(replicas === 1 ? 'bullmq-1' : 'bullmq-3', {
            tag: ` (cost, ${variant})`,
            redisUrl,
            maxConcurrency,
            clients: variant !== 'pooled' && variant !== 'contended',
            budgets: variant === 'pooled-budgets',
          });
    const t = target;
    const load = (connections: number, amount: number) =>
      runFixedLoad({
        urls: t.urls,
        headers: t.headers,
        rotatingHeaders: t.rotatingHeaders,
        body: CHAT_BODY,
        connections,
        amount,
      });
    await load(Math.max(...concurrencies), Math.max(opts.warmupRequests, ...concurrencies));
    // Leases of the warm-up are released; let one renew/sweep period pass before counting.
    await sleep(1000);
    if (!idle) {
      measuredIdle = await measureIdle(reader, replicas, opts.idleSeconds);
      idle = measuredIdle;
      log(
        `  redis-cost idle, ${variant === 'floor' ? 'round-trip floor' : `${replicas} replica(s)`}: ${idle.perReplicaPerS.toFixed(1)} commands/s per replica ` +
          `(${idle.breakdown.map((b) => `${b.command} ${b.perReplicaPerS.toFixed(1)}`).join(', ')}), Redis CPU ${idle.cpuMsPerS.toFixed(2)} ms/s`,
      );
    }
    for (const run of runs) {
      current = run;
      const totals = new Map<string, { calls: number; usec: number }>();
      let requestsTotal = 0;
      for (let round = 0; round < opts.rounds; round++) {
        const before = await reader.snapshot();
        const startedAt = performance.now();
        const point = await load(run.concurrency, opts.requests);
        const delta = reader.delta(before, await reader.snapshot());
        // The window between the snapshots, which the idle background is taken off over.
        const seconds = (performance.now() - startedAt) / 1000;
        const publishes = delta.commands.find((c) => c.command === 'publish')?.calls ?? 0;
        const r: RedisCostRound = {
          requests: opts.requests,
          ok: point.ok,
          failures: point.failures,
          seconds,
          rps: point.rps,
          p50Ms: point.p50Ms,
          commands: delta.totalCalls,
          cpuMs: delta.cpuMs,
          publishes,
        };
        run.rounds.push(r);
        addTo(totals, delta);
        requestsTotal += r.requests;
        log(
          `  redis-cost ${variant} ×${replicas} c=${run.concurrency} round ${round + 1}/${opts.rounds}: ${(r.commands / r.requests).toFixed(2)} commands/request, ` +
            `${(r.cpuMs / r.requests).toFixed(4)} ms Redis CPU/request, ${r.rps.toFixed(0)} req/s` +
            (contended ? `, ${((100 * publishes) / r.requests).toFixed(0)}% queued` : '') +
            (r.failures ? `, failures ${r.failures}` : ''),
        );
      }
      summarize(run, totals, requestsTotal, idle, pooled);
    }
  } catch (err) {
    const message = (err as Error).message;
    for (const run of runs) if (run === current || run.rounds.length === 0) run.error ??= message;
    log(`  redis-cost ${variant} ×${replicas}: ${message}`);
  } finally {
    if (target) await launcher.shutdown(target);
  }
  return { idle: measuredIdle, runs };
}

async function measureIdle(reader: RedisStatsReader, replicas: number, seconds: number): Promise<RedisIdleRun> {
  const before: RedisSnapshot = await reader.snapshot();
  const startedAt = performance.now();
  await sleep(seconds * 1000);
  const delta = reader.delta(before, await reader.snapshot());
  const elapsed = (performance.now() - startedAt) / 1000;
  return {
    replicas,
    seconds: elapsed,
    commandsPerS: delta.totalCalls / elapsed,
    perReplicaPerS: delta.totalCalls / elapsed / replicas,
    cpuMsPerS: delta.cpuMs / elapsed,
    breakdown: delta.commands.map((c) => ({ command: c.command, perReplicaPerS: c.calls / elapsed / replicas })),
  };
}

function addTo(totals: Map<string, { calls: number; usec: number }>, delta: RedisDelta): void {
  for (const c of delta.commands) {
    const t = totals.get(c.command) ?? { calls: 0, usec: 0 };
    t.calls += c.calls;
    t.usec += c.usec;
    totals.set(c.command, t);
  }
}

/** Fills the per-request figures of `run` from its rounds (nets use the idle background of the same replica count). */
export function summarize(
  run: RedisCostRun,
  totals: ReadonlyMap<string, { calls: number; usec: number }>,
  requests: number,
  idle: Pick<RedisIdleRun, 'commandsPerS' | 'cpuMsPerS'> | undefined,
  pooled: Pick<RedisCostRun, 'netCommandsPerRequest'> | undefined,
): void {
  const rounds = run.rounds;
  const idleCommands = idle?.commandsPerS ?? NaN;
  const idleCpu = idle?.cpuMsPerS ?? NaN;
  run.commandsPerRequest = spread(rounds.map((r) => r.commands / r.requests));
  run.netCommandsPerRequest = spread(rounds.map((r) => (r.commands - idleCommands * r.seconds) / r.requests));
  run.cpuMsPerRequest = spread(rounds.map((r) => r.cpuMs / r.requests));
  run.netCpuMsPerRequest = spread(rounds.map((r) => (r.cpuMs - idleCpu * r.seconds) / r.requests));
  run.rps = spread(rounds.map((r) => r.rps));
  run.failures = rounds.reduce((n, r) => n + r.failures, 0);
  run.breakdown = [...totals]
    .map(([command, t]) => ({ command, perRequest: t.calls / requests, usecPerRequest: t.usec / requests }))
    .sort((a, b) => b.perRequest - a.perRequest || a.command.localeCompare(b.command));
  if (isContended(run.variant)) {
    run.queuedShare = spread(rounds.map((r) => r.publishes / r.requests));
    const base = pooled?.netCommandsPerRequest.median ?? NaN;
    run.commandsPerQueuedRequest = spread(
      rounds.map((r) => {
        const net = (r.commands - idleCommands * r.seconds) / r.requests;
        const share = r.publishes / r.requests;
        return share > 0 ? base + (net - base) / share : NaN;
      }),
    );
  }
}
