import { MemoryProviderQueue, RedisProviderQueue, estimateTokenWeight, type ProviderQueue } from '@iop/dispatch';
import { startRedis, uniquePrefix, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream, type JournalCall } from '@iop/fake-upstream';
import pino from 'pino';
import type { DispatchBody } from './dispatch/dispatcher-deps';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

// docs/architecture.md "Token limits": a provider's max_tokens_in_flight holds at the upstream, measured from the
// calls it saw: short requests flow beside a long one, a long one waits for the tokens a prefill gives back, and a
// request larger than the whole limit runs alone. On the memory and the Redis backend.

const LIMIT = 1000;
const yaml = `
version: 1
nodes:
  - id: n
    adapters:
      - { id: v, type: vllm, base_url: "\${UP}" }
    providers:
      - { id: p, category: vllm, adapter: v, models: [m], max_concurrency: 16, max_tokens_in_flight: ${LIMIT} }
`;

/** One kind of request: its text, completion allowance, time to the first byte at the upstream and tag. */
interface Kind {
  tag: number;
  text: string;
  maxTokens: number;
  delayMs: number;
}
const LONG: Kind = { tag: 1, text: 'L'.repeat(1800), maxTokens: 100, delayMs: 500 };
const SHORT: Kind = { tag: 2, text: 'a short question?', maxTokens: 40, delayMs: 40 };
const HUGE: Kind = { tag: 3, text: 'H'.repeat(4500), maxTokens: 100, delayMs: 200 };

const bodyOf = (k: Kind) => ({
  model: 'm',
  stream: true,
  max_tokens: k.maxTokens,
  messages: [{ role: 'user', content: k.text }],
  fake: { tag: k.tag, delay_ms: k.delayMs, chunks: 3, chunk_gap_ms: 60 },
});
const weightOf = (k: Kind) => {
  const w = estimateTokenWeight('chat', bodyOf(k) as unknown as DispatchBody);
  return { prompt: w.prompt, completion: w.completion ?? 0 };
};
const kindOf = (tag: number | undefined) => [LONG, SHORT, HUGE].find((k) => k.tag === tag) ?? SHORT;

/**
 * The tokens the upstream holds at `t` by the gateway's estimates: a call's completion allowance from its arrival
 * to its end, its prompt until its first byte left (arrival + its delay; 5 ms early, since a timer may fire a
 * millisecond early by `Date.now()`), the gateway's own holding being never shorter.
 */
function heldAt(calls: JournalCall[], t: number): { tokens: number; open: JournalCall[] } {
  const open = calls.filter((c) => c.startedAt <= t && (c.endedAt ?? Infinity) > t);
  const tokens = open.reduce((sum, c) => {
    const k = kindOf(c.tag);
    const w = weightOf(k);
    return sum + w.completion + (t < c.startedAt + k.delayMs - 5 ? w.prompt : 0);
  }, 0);
  return { tokens, open };
}

const backends: Array<[string, boolean]> = [
  ['memory backend', false],
  ['Redis backend', true],
];

describe.each(backends)('max_tokens_in_flight at the upstream (%s)', (_b, onRedis) => {
  let redis: TestRedis | undefined;
  let upstream: FakeUpstream;
  let gateway: TestGateway | undefined;

  beforeAll(async () => {
    redis = onRedis ? await startRedis() : undefined;
    upstream = await startFakeUpstream({ journal: true, models: ['m'] });
  });
  afterAll(async () => {
    await gateway?.close();
    await upstream?.close();
    await redis?.stop();
  });

  const makeQueue = (): ProviderQueue =>
    redis
      ? new RedisProviderQueue({
          redisUrl: redis.url,
          prefix: uniquePrefix('tokens-gw'),
          logger: pino({ level: 'silent' }),
        })
      : new MemoryProviderQueue();

  it('keeps the estimated tokens at the upstream within the limit; shorts flow beside a long one; a huge one runs alone', async () => {
    expect(weightOf(LONG).prompt + weightOf(LONG).completion).toBeLessThanOrEqual(LIMIT);
    expect(2 * (weightOf(LONG).prompt + weightOf(LONG).completion)).toBeGreaterThan(LIMIT);
    expect(weightOf(HUGE).prompt).toBeGreaterThan(LIMIT);
    gateway = await startTestGateway(yaml, { UP: upstream.origin }, makeQueue());
    const send = async (k: Kind) => {
      const res = await fetch(`${gateway!.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(bodyOf(k)),
      });
      const text = await res.text();
      return { status: res.status, done: text.includes('data: [DONE]') };
    };
    const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const sent: Promise<{ status: number; done: boolean }>[] = [send(LONG)];
    await pause(60);
    for (let i = 0; i < 6; i++) {
      sent.push(send(SHORT));
      await pause(15);
    }
    sent.push(send(LONG), send(HUGE));
    await pause(15);
    for (let i = 0; i < 4; i++) sent.push(send(SHORT));
    const answers = await Promise.all(sent);
    expect(answers.every((a) => a.status === 200 && a.done)).toBe(true);

    const calls = upstream.calls().filter((c) => c.model === 'm');
    expect(calls).toHaveLength(sent.length);
    for (const c of calls) {
      const { tokens, open } = heldAt(calls, c.startedAt);
      // Past the limit only a request larger than it, alone at the upstream.
      if (tokens > LIMIT) expect(open.map((o) => o.tag)).toEqual([HUGE.tag]);
    }
    const [firstLong, secondLong] = calls.filter((c) => c.tag === LONG.tag);
    const shortsBeside = calls.filter(
      (c) =>
        c.tag === SHORT.tag && c.startedAt >= firstLong.startedAt && c.endedAt! <= firstLong.startedAt + LONG.delayMs,
    );
    expect(shortsBeside.length).toBeGreaterThanOrEqual(4);
    // The second long request came in when the first one's prefill gave its prompt tokens back.
    expect(secondLong.startedAt).toBeGreaterThanOrEqual(firstLong.startedAt + LONG.delayMs - 5);
    expect(secondLong.startedAt).toBeLessThan(firstLong.endedAt!);
    const huge = calls.find((c) => c.tag === HUGE.tag)!;
    expect(heldAt(calls, huge.startedAt).open).toHaveLength(1);
    // The last leases end just after their answers do (a release is one more Redis call on that
    // backend), so the counts are read once nothing is in flight, and then must hold no token.
    const g = gateway;
    await waitUntil(async () => (await g.queue.counts(['p'])).get('p')?.inFlight === 0, 5000, 'the last releases');
    expect((await g.queue.counts(['p'])).get('p')).toEqual({ inFlight: 0, queued: 0, tokensInFlight: 0 });
  });
});
