import { leaseAddresses, queueProviders, readLeaseCounts } from '@iop/dispatch';
import { scanKeys } from '@iop/dispatch/testing';
import type { EdgeConfig } from '@iop/validate';
import type { Redis } from 'ioredis';
import type { ChaosReport } from './chaos-report';
import type { UpstreamChild } from './upstream-child';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Waits, up to 15 s, until every lease is released and every waiting job gone, cluster-wide, and the
 * meter shows no call open; returns what was left in Redis then (-1 for a count never read) and how
 * long it waited, in ms.
 */
export async function waitForDrain(
  reader: Redis,
  redisUrl: string,
  prefix: string,
  config: EdgeConfig,
  upstream: UpstreamChild,
): Promise<ChaosReport['leftAfterDrain']> {
  const ids = queueProviders(config).map((p) => p.providerId);
  const drainStart = Date.now();
  let left = { inFlight: -1, queued: -1, jobKeys: -1 };
  while (Date.now() - drainStart < 15_000) {
    try {
      const counts = await readLeaseCounts(reader, prefix, leaseAddresses(config, ids));
      const jobKeys = (await scanKeys(redisUrl, `${prefix}:`)).filter((k) =>
        /:provider\.[^:]+:[A-Za-z0-9_-]+\.\d+$/.test(k),
      ).length;
      left = {
        inFlight: [...counts.values()].reduce((n, c) => n + c.inFlight, 0),
        queued: [...counts.values()].reduce((n, c) => n + c.queued, 0),
        jobKeys,
      };
      const open = Object.values((await upstream.read()).counts).reduce((n, c) => n + c.current, 0);
      if (left.inFlight === 0 && left.queued === 0 && jobKeys === 0 && open === 0) break;
    } catch {
      // Redis busy: try again
    }
    await sleep(200);
  }
  return { ...left, drainMs: Date.now() - drainStart };
}
