import type { TestRedis } from '@iop/dispatch/testing';
import type { ChaosReport } from './chaos-report';
import { chatMessages } from './request-kinds';
import { setTimeout as sleep } from 'node:timers/promises';

/** What {@link restartRedis} needs of the run. */
export interface RedisRestartRun {
  redis: TestRedis;
  /** The run's length, in s: Redis is killed halfway. */
  seconds: number;
  /** A live gateway replica's URL, asked afresh at each try. */
  gatewayUrl(): string;
  exporterUrl: string;
  /** Logs a moment of the run. */
  event(what: string): void;
  /** The run's breaches; a recovery that does not come within 30 s is one. */
  violations: string[];
}

/**
 * Kills Redis once, halfway, restarts it empty, and measures how long pooled traffic and the
 * exporter take to recover (ms after the restart, -1 when not within 30 s).
 */
export async function restartRedis(run: RedisRestartRun): Promise<NonNullable<ChaosReport['redisRestart']>> {
  const { redis, event, violations } = run;
  await sleep((run.seconds * 1000) / 2);
  event('Redis SIGKILL');
  const downAt = Date.now();
  await redis.kill();
  await sleep(1000);
  await redis.start();
  const upAt = Date.now();
  event('Redis restarted (empty)');
  const pooled = (async () => {
    while (Date.now() - upAt < 30_000) {
      const res = await fetch(`${run.gatewayUrl()}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'pool', messages: chatMessages }),
      }).catch(() => undefined);
      if (res?.status === 200) return Date.now() - upAt;
      await res?.text().catch(() => undefined);
      await sleep(100);
    }
    violations.push('pooled requests did not recover within 30 s of the Redis restart');
    return -1;
  })();
  const exported = (async () => {
    while (Date.now() - upAt < 30_000) {
      const text = await fetch(`${run.exporterUrl}/metrics`)
        .then((r) => r.text())
        .catch(() => '');
      if (/^iop_edge_status_counts_up 1$/m.test(text)) return Date.now() - upAt;
      await sleep(100);
    }
    violations.push('the exporter did not read counts again within 30 s of the Redis restart');
    return -1;
  })();
  const [pooledRecoveryMs, exporterRecoveryMs] = await Promise.all([pooled, exported]);
  return { downMs: upAt - downAt, pooledRecoveryMs, exporterRecoveryMs, downAt, upAt };
}
