import { startFakeUpstream } from '@iop/fake-upstream';
import { startMeter } from './upstream-meter';
import type { UpstreamReply, UpstreamRequest } from './upstream-child';

/**
 * The chaos run's upstream as a process of its own (forked by `startUpstreamChild`): the fake
 * upstream behind the concurrency meter, answering the parent's questions over IPC. A model server
 * does not share its event loop with the clients that load the gateways, so neither does this one:
 * in the test process, a busy loop read a close and the next caller's request in one turn.
 * `process.argv[2]` is the limits table of {@link startMeter}, as JSON; `process.argv[3]` is `journal`
 * to keep the fake upstream's call journal (the `calls` question).
 */
async function main(): Promise<void> {
  let t0 = Date.now();
  const fake = await startFakeUpstream({ name: 'chaos', journal: process.argv[3] === 'journal' });
  const limits = JSON.parse(process.argv[2] ?? '{}') as Record<string, { provider: string; limit: number }>;
  const meter = await startMeter(fake.url.replace(/\/v1$/, ''), limits, () => t0);
  const answer = (reply: UpstreamReply) => process.send?.(reply);
  process.on('message', (msg: UpstreamRequest) => {
    switch (msg.op) {
      case 'read': {
        const byModel = fake.stats().byModel;
        const fakeMax = Object.fromEntries(Object.entries(byModel).map(([model, c]) => [model, c.max]));
        answer({ id: msg.id, counts: meter.counts(), overlaps: meter.overlaps, fakeMax });
        return;
      }
      case 'calls':
        answer({ id: msg.id, calls: fake.calls() });
        return;
      case 'reset':
        t0 = msg.t0;
        meter.reset();
        fake.reset();
        answer({ id: msg.id });
        return;
      case 'close':
        void Promise.all([meter.close(), fake.close()]).finally(() => {
          answer({ id: msg.id });
          process.exit(0);
        });
    }
  });
  answer({ id: 0, url: meter.url });
}

// Orphaned (the test process died): nothing to report to, so stop.
process.on('disconnect', () => process.exit(0));
main().catch((err: unknown) => {
  process.stderr.write(`chaos upstream: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(2);
});
