import { startRedis, uniquePrefix, type TestRedis } from '../testing';
import { BullmqProviderQueue } from './bullmq-queue';
import type { BullmqProviderQueueOptions } from './bullmq-options';
import { describeProviderQueueContract } from './provider-queue.contract';

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

function makeQueue(prefix: string, extra: Partial<BullmqProviderQueueOptions> = {}): BullmqProviderQueue {
  return new BullmqProviderQueue({ redisUrl: redis.url, prefix, logger: silent, ...extra });
}

describeProviderQueueContract('bullmq', async () => makeQueue(uniquePrefix('contract')));
