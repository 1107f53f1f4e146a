import { startRedis, type TestRedis } from '@iop/dispatch/testing';
import { parseConfigText } from '@iop/validate';
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  EXPORTER_MAIN,
  GATEWAY_MAIN,
  spawnService,
  writeTempConfig,
  type ServiceProcess,
} from '../testing/exporter-fixtures';
import { openAiError, streamEnded } from './answer-outcome';
import { chaosYaml, PROVIDERS } from './chaos-config';
import type { ChaosOptions } from './chaos-options';
import { fencesOutsideRestart, warnLines, type ChaosReport } from './chaos-report';
import { waitForDrain } from './left-after-drain';
import { prng } from './prng';
import { restartRedis } from './redis-restart';
import { DROP_SHARE, pickKind } from './request-kinds';
import { startUpstreamChild } from './upstream-child';

interface Replica {
  process: ServiceProcess;
  url: string;
  killedAt?: number;
}

/** Runs the chaos scenario and reports; never throws for a breach (see `violations`), only for a setup failure. */
export async function runChaos(opts: ChaosOptions): Promise<ChaosReport> {
  const log = opts.log ?? (() => undefined);
  const random = prng(opts.seed);
  const violations: string[] = [];
  const outcomes: Record<string, number> = {};
  const kinds: Record<string, number> = {};
  const count = (map: Record<string, number>, key: string) => (map[key] = (map[key] ?? 0) + 1);

  const redis: TestRedis = await startRedis({ forceOwn: true });
  // The fake upstream and its meter run in a process of their own, as a model server would.
  const upstream = await startUpstreamChild(
    Object.fromEntries(PROVIDERS.map((p) => [p.upstream, { provider: p.id, limit: p.limit }])),
  );
  const prefix = `chaos-${process.pid}-${Math.floor(random() * 1e9)}`;
  const yaml = chaosYaml();
  const env = { REDIS_URL: redis.url, UPSTREAM: upstream.url, PREFIX: prefix };
  const loaded = parseConfigText(yaml, env, 'chaos.yaml');
  if (!loaded.ok) throw new Error(`chaos config invalid: ${JSON.stringify(loaded.problems)}`);
  const file = writeTempConfig(yaml);
  const startReplica = async (): Promise<Replica> => {
    const process = await spawnService(GATEWAY_MAIN, ['serve', '--config', file, '--listen', '127.0.0.1:0'], { env });
    if (!process.url) throw new Error(`a gateway replica did not start:\n${process.output()}`);
    return { process, url: process.url };
  };
  const replicas: Replica[] = await Promise.all([startReplica(), startReplica(), startReplica()]);
  const all = [...replicas];
  const exporter = await spawnService(EXPORTER_MAIN, ['--config', file, '--listen', '127.0.0.1:0'], { env });
  if (!exporter.url) throw new Error(`the exporter did not start:\n${exporter.output()}`);
  const exporterUrl = exporter.url;
  const reader = new Redis(redis.url, { maxRetriesPerRequest: 1, retryStrategy: () => 200 });
  reader.on('error', () => undefined);

  const report: ChaosReport = {
    options: {
      seconds: opts.seconds,
      clients: opts.clients,
      killEveryMs: opts.killEveryMs,
      seed: opts.seed,
      redisRestart: opts.redisRestart ?? true,
      dropShare: opts.dropShare ?? DROP_SHARE,
    },
    requests: 0,
    outcomes,
    kinds,
    kills: 0,
    replicaStartMs: [],
    redisRestart: undefined,
    concurrency: {},
    fakeUpstreamMax: {},
    replicaWarnings: {},
    leftAfterDrain: { inFlight: -1, queued: -1, jobKeys: -1, drainMs: -1 },
    violations,
  };

  const startedAt = Date.now();
  await upstream.reset(startedAt);
  const deadline = startedAt + opts.seconds * 1000;
  const live = () => replicas.filter((r) => r.killedAt === undefined);
  /** What happened when, in ms from the start: kills, the Redis restart, any moment over a limit. */
  const events: string[] = [];
  const event = (what: string) => {
    events.push(`${Date.now() - startedAt} ms: ${what}`);
    log(`chaos: ${what}`);
  };
  // Watches the highest counts, so a breach is reported with when it happened.
  const reported = new Set<string>();
  let reading = false;
  const watch = setInterval(() => {
    if (reading) return;
    reading = true;
    void upstream
      .read()
      .then(
        ({ counts }) => {
          for (const p of PROVIDERS) {
            const max = counts[p.upstream]?.max ?? 0;
            if (max > p.limit && !reported.has(`${p.id}${max}`)) {
              reported.add(`${p.id}${max}`);
              event(`provider ${p.id} reached ${max} calls at once (limit ${p.limit})`);
            }
          }
        },
        () => undefined,
      )
      .finally(() => (reading = false));
  }, 20);

  /** One client: requests until the deadline, each classified. */
  const client = async () => {
    while (Date.now() < deadline) {
      const targets = live();
      const replica = targets[Math.floor(random() * targets.length)];
      const kind = pickKind(random);
      const drop = random() < (opts.dropShare ?? DROP_SHARE) ? Math.floor(random() * 300) : undefined;
      const startedAt = Date.now();
      count(kinds, drop === undefined ? kind.name : `${kind.name} (dropped)`);
      report.requests++;
      const controller = new AbortController();
      const timer = drop === undefined ? undefined : setTimeout(() => controller.abort(), drop);
      const lost = () => replica.killedAt !== undefined && replica.killedAt >= startedAt - 50;
      try {
        const res = await fetch(`${replica.url}${kind.path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(kind.body(random)),
          signal: controller.signal,
        });
        const text = await res.text();
        if (res.status === 200) {
          const complete = kind.stream
            ? streamEnded(text)
            : (() => {
                try {
                  JSON.parse(text);
                  return true;
                } catch {
                  return false;
                }
              })();
          if (complete) count(outcomes, 'ok');
          else if (lost()) count(outcomes, 'lost_with_killed_replica');
          else {
            count(outcomes, 'incomplete');
            violations.push(`${kind.name} on ${replica.url}: 200 with an incomplete body: ${text.slice(-200)}`);
          }
        } else {
          const shaped = openAiError(res.status, text);
          if (shaped) count(outcomes, shaped);
          else if (lost()) count(outcomes, 'lost_with_killed_replica');
          else {
            count(outcomes, `unshaped ${res.status}`);
            violations.push(`${kind.name} on ${replica.url}: ${res.status} not OpenAI-shaped: ${text.slice(0, 200)}`);
          }
        }
      } catch (err) {
        if (controller.signal.aborted) count(outcomes, 'client_aborted');
        else if (lost()) count(outcomes, 'lost_with_killed_replica');
        else {
          count(outcomes, 'connection_error');
          violations.push(
            `${kind.name} on ${replica.url}: no answer (${(err as Error).message}; ${(err as { cause?: Error }).cause?.message ?? ''})`,
          );
        }
      } finally {
        clearTimeout(timer);
      }
    }
  };

  /** SIGKILLs a random replica every `killEveryMs` and starts a replacement. */
  const killer = async () => {
    while (opts.killEveryMs > 0 && Date.now() + opts.killEveryMs < deadline) {
      await sleep(opts.killEveryMs * (0.75 + random() * 0.5));
      if (Date.now() >= deadline) break;
      const targets = live();
      if (targets.length < 3) continue;
      const victim = targets[Math.floor(random() * targets.length)];
      victim.killedAt = Date.now();
      victim.process.child.kill('SIGKILL');
      report.kills++;
      event(`SIGKILL ${victim.url}`);
      const spawnedAt = Date.now();
      try {
        const fresh = await startReplica();
        report.replicaStartMs.push(Date.now() - spawnedAt);
        replicas.push(fresh);
        all.push(fresh);
      } catch (err) {
        violations.push(`a replacement replica did not start: ${(err as Error).message}`);
      }
    }
  };

  /** Kills Redis once, halfway, and restarts it empty ({@link restartRedis}). */
  const redisChaos = async () => {
    if (opts.redisRestart === false) return;
    report.redisRestart = await restartRedis({
      redis,
      seconds: opts.seconds,
      gatewayUrl: () => live()[0].url,
      exporterUrl,
      event,
      violations,
    });
  };

  try {
    await Promise.all([...Array.from({ length: opts.clients }, client), killer(), redisChaos()]);

    // Drain: every lease released and every waiting job gone, cluster-wide.
    report.leftAfterDrain = await waitForDrain(reader, redis.url, prefix, loaded.config, upstream);
    const left = report.leftAfterDrain;
    if (left.inFlight !== 0 || left.queued !== 0 || left.jobKeys !== 0)
      violations.push(`left after the load drained: ${JSON.stringify(left)}`);

    const { counts, overlaps, fakeMax } = await upstream.read();
    for (const p of PROVIDERS) {
      const max = counts[p.upstream]?.max ?? 0;
      report.fakeUpstreamMax[p.id] = fakeMax[p.upstream] ?? 0;
      report.concurrency[p.id] = { max, limit: p.limit };
    }
    // Over a limit at the meter or at the fake upstream: a breach, whatever ended it (no excuse).
    for (const o of overlaps)
      violations.push(
        `provider ${o.provider}: over max_concurrency for ${o.durationMs} ms at ${o.at} ms (ended by ${o.endedBy}; ` +
          `the upstream's event loop stalled up to ${o.loopLagMs} ms within a second of it)`,
      );
    for (const p of PROVIDERS)
      if (report.fakeUpstreamMax[p.id] > p.limit)
        violations.push(
          `provider ${p.id}: the fake upstream saw ${report.fakeUpstreamMax[p.id]} at once (limit ${p.limit})`,
        );
    // No fenced victim: outside the Redis restart, no replica aborted a call for want of renewal.
    for (const r of all)
      for (const line of fencesOutsideRestart(r.process.output(), report.redisRestart))
        violations.push(`replica ${r.url} fenced a lease outside the Redis restart: ${line.slice(0, 300)}`);
    for (const r of live())
      if (r.process.child.exitCode !== null)
        violations.push(`replica ${r.url} died on its own:\n${r.process.output().slice(-1000)}`);
  } finally {
    clearInterval(watch);
    report.events = events;
    for (const r of all) report.replicaWarnings[r.url] = warnLines(r.process.output());
    reader.disconnect();
    await Promise.all(all.map((r) => (r.killedAt === undefined ? r.process.stop() : Promise.resolve(null))));
    await exporter.stop();
    await upstream.close();
    await redis.stop();
  }
  return report;
}
