import { MemoryProviderQueue, RedisProviderQueue, type ProviderQueue, type QueueProvider } from '@iop/dispatch';
import { silentLibLogger, type LibLogger } from '@iop/validate';
import { percentile, spread, type Spread } from './stats';

/** A `ProviderQueue` setup measured by the admission scenario. */
export type AdmissionBackend = 'memory' | 'bullmq-1' | 'bullmq-3';

/** One backend's admission cost over every round (README "Benchmarks"). */
export interface AdmissionRow {
  backend: AdmissionBackend;
  /** acquireLease + release on an idle provider, one at a time: median per round, ms. */
  idleMedianMs: Spread;
  /** Same, p99 per round, ms. */
  idleP99Ms: Spread;
  /** Median over memory's in the same round, ms (absent for memory). */
  idleMedianOverMemoryMs?: Spread;
  /** Hand-offs per second on a saturated provider (max_concurrency 4, 32 callers). */
  saturatedPerS: Spread;
}

const IDLE: QueueProvider = { providerId: 'idle', maxConcurrency: 1000, maxQueued: 10_000 };
const SATURATED: QueueProvider = { providerId: 'saturated', maxConcurrency: 4, maxQueued: 10_000 };

/** Builds the replicas of one backend: 1 memory queue, or 1 or 3 Redis queues sharing a prefix. */
async function openBackend(
  backend: AdmissionBackend,
  redisUrl: () => Promise<string>,
  round: number,
): Promise<ProviderQueue[]> {
  if (backend === 'memory') return [new MemoryProviderQueue()];
  const url = await redisUrl();
  const prefix = `iop-bench-admission-${process.pid}-${backend}-${round}`;
  const quiet: LibLogger = {
    ...silentLibLogger,
    error: (obj: { err?: unknown }, m) =>
      process.stderr.write(`[bench] ${m}${obj.err instanceof Error ? `: ${obj.err.message}` : ''}\n`),
  };
  return Array.from(
    { length: backend === 'bullmq-3' ? 3 : 1 },
    () => new RedisProviderQueue({ redisUrl: url, prefix, logger: quiet }),
  );
}

/** Sequential acquire + release on an idle provider; returns each cycle's duration in ms. */
async function idleCycles(queues: ProviderQueue[], cycles: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < cycles; i++) {
    const started = performance.now();
    const lease = await queues[i % queues.length].acquireLease({
      modelGroupKey: 'bench',
      candidates: [IDLE],
      maxWaitMs: 10_000,
    });
    await lease.release();
    out.push(performance.now() - started);
  }
  return out;
}

/** `callers` loops each acquiring and releasing a lease on a 4-slot provider for `seconds`; returns hand-offs per second. */
async function saturatedRate(queues: ProviderQueue[], callers: number, seconds: number): Promise<number> {
  const until = performance.now() + seconds * 1000;
  let handoffs = 0;
  await Promise.all(
    Array.from({ length: callers }, async (_, c) => {
      const queue = queues[c % queues.length];
      while (performance.now() < until) {
        const lease = await queue.acquireLease({ modelGroupKey: 'bench', candidates: [SATURATED], maxWaitMs: 30_000 });
        await lease.release();
        handoffs++;
      }
    }),
  );
  return handoffs / seconds;
}

/**
 * Admission overhead of the `ProviderQueue` backends, in process (README "Benchmarks"): the cost of
 * acquireLease + release on an idle pool (median, p99) and the hand-off rate of a saturated one,
 * memory vs Redis with 1 and 3 replicas on one Redis. Rounds are interleaved (memory, bullmq-1,
 * bullmq-3, memory, …); each round opens fresh queues and warms them up first.
 */
export async function runAdmission(
  opts: { rounds: number; seconds: number; cycles: number },
  redisUrl: () => Promise<string>,
  log: (line: string) => void,
): Promise<AdmissionRow[]> {
  const backends: AdmissionBackend[] = ['memory', 'bullmq-1', 'bullmq-3'];
  const per = new Map(
    backends.map((b) => [
      b,
      { median: [] as number[], p99: [] as number[], over: [] as number[], rate: [] as number[] },
    ]),
  );
  for (let round = 0; round < opts.rounds; round++) {
    let memoryMedian = NaN;
    for (const backend of backends) {
      const queues = await openBackend(backend, redisUrl, round);
      try {
        await Promise.all(queues.map((q) => q.configure([IDLE, SATURATED])));
        await idleCycles(queues, Math.min(200, opts.cycles));
        const cycles = await idleCycles(queues, opts.cycles);
        const rate = await saturatedRate(queues, 32, opts.seconds);
        const row = per.get(backend)!;
        const median = percentile(cycles, 50);
        row.median.push(median);
        row.p99.push(percentile(cycles, 99));
        row.rate.push(rate);
        if (backend === 'memory') memoryMedian = median;
        else row.over.push(median - memoryMedian);
        log(
          `admission round ${round + 1}: ${backend} idle median ${median.toFixed(3)} ms, saturated ${rate.toFixed(0)}/s`,
        );
      } finally {
        await Promise.all(queues.map((q) => q.close()));
      }
    }
  }
  return backends.map((backend) => {
    const row = per.get(backend)!;
    return {
      backend,
      idleMedianMs: spread(row.median),
      idleP99Ms: spread(row.p99),
      idleMedianOverMemoryMs: backend === 'memory' ? undefined : spread(row.over),
      saturatedPerS: spread(row.rate),
    };
  });
}
