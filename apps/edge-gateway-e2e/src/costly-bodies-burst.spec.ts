import { startRedis, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { gzipSync } from 'node:zlib';
import { burstYaml, openStream, startReplicaFleet, type ReplicaFleet } from './testing/replica-fleet';

const repeat = (item: string, n: number) => new Array<string>(n).fill(item).join(',');
const keys = (n: number, salt: string) => Array.from({ length: n }, (_, i) => `"k${salt}${i}":0`).join(',');
const chat = (rest: string) => `{"model":"duo","messages":[{"role":"user","content":"x"}],${rest}}`;

/**
 * The costliest bodies one client can send, gzip (a few KB each): the shapes a red-team pass sent
 * under the old weights (empty containers weighing 1 value, members 10), each 100-200× a normal
 * request's CPU, now over `gateway.max_body_values` (413 before the parse), and the same shapes at
 * the most the default bound admits, refused after the parse (400, unknown model) or answered. Keys
 * are new in every body (a key V8 has not seen builds a hidden class).
 */
function costlyBodies(round: number): { path: string; body: Buffer }[] {
  const salt = `r${round}`;
  const texts: [string, string][] = [
    // Old bound: 413 now.
    ['/v1/chat/completions', chat(`"x":[${repeat('{}', 245_000)}]`)],
    ['/v1/chat/completions', chat(keys(49_000, `${salt}a`))],
    ['/v1/chat/completions', chat(`"x":[${repeat(`${'['.repeat(98)}${']'.repeat(98)}`, 4000)}]`)],
    ['/v1/responses', `{"model":"duo","input":[${repeat('[]', 245_000)}]}`],
    ['/v1/embeddings', `{"model":"duo","input":[${repeat('"a"', 450_000)}]}`],
    ['/v1/chat/completions', chat(`"x":[${repeat('[0,0]', 160_000)}]`)],
    // At the new default bound: parsed, then refused by the schema or the route, or forwarded.
    ['/v1/chat/completions', `{"model":"duo","messages":[${repeat('{}', 55_000)}]}`],
    ['/v1/chat/completions', chat(keys(24_500, `${salt}b`)).replace('"duo"', '"no-such-model"')],
    ['/v1/chat/completions', chat(`"x":[${repeat(`${'['.repeat(98)}${']'.repeat(98)}`, 630)}]`)],
    ['/v1/responses', `{"model":"duo","input":[${repeat('[]', 55_000)}]}`],
    ['/v1/embeddings', `{"model":"duo","input":[${repeat('"a"', 400_000)}]}`],
    ['/v1/chat/completions', `{"model":"duo","messages":[${repeat('0', 495_000)}]}`],
  ];
  return texts.map(([path, text]) => ({ path, body: gzipSync(text) }));
}

/**
 * One client's burst of costly bodies never stalls the event loop long enough to fence another
 * user's lease (README "Security", its costly-bodies row; docs/architecture.md "Costly bodies",
 * "Fencing"): a gateway process on Redis holds pooled streams of another client open while twelve
 * of the costliest bodies arrive at once, twice; every body is refused or bounded before it is
 * costly, the ones that are parsed are parsed one per turn of the event loop, and the lease renewal
 * runs between them. Fails on a stream cut, a `not renewed` warning, or `/healthz` slower than 1 s.
 */
describe('a burst of costly bodies from one client (Redis backend)', () => {
  let redis: TestRedis;
  let upstream: FakeUpstream;
  let fleet: ReplicaFleet | undefined;

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startFakeUpstream();
  });
  afterAll(async () => {
    await fleet?.close();
    await upstream.close();
    await redis.stop();
  });

  it("keeps other users' pooled streams and /healthz going through 2 × 12 costly gzip bodies at once", async () => {
    fleet = await startReplicaFleet(1, burstYaml(), redis.url, upstream.url);
    const [gateway] = fleet.replicas;
    // Another user's pooled streams: 120 chunks 50 ms apart (6 s), each holding a lease renewed every 500 ms.
    const streams = await Promise.all([
      openStream(gateway.url, 'single', { chunks: 120, chunk_gap_ms: 50 }),
      openStream(gateway.url, 'duo', { chunks: 120, chunk_gap_ms: 50 }),
      openStream(gateway.url, 'duo', { chunks: 120, chunk_gap_ms: 50 }),
    ]);
    for (const s of streams) expect(s.status).toBe(200);

    // Made and compressed before the probe starts: the test's own loop must not delay its probes.
    const rounds = [costlyBodies(1), costlyBodies(2)];
    let probing = true;
    const probes: number[] = [];
    const probe = (async () => {
      while (probing) {
        const startedAt = performance.now();
        expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200);
        probes.push(performance.now() - startedAt);
        await new Promise((r) => setTimeout(r, 25));
      }
    })();
    const statuses: number[] = [];
    for (const bodies of rounds) {
      const answers = await Promise.all(
        bodies.map(async ({ path, body }) => {
          const res = await fetch(`${gateway.url}${path}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
            body,
          });
          await res.text();
          return res.status;
        }),
      );
      statuses.push(...answers);
    }
    probing = false;
    await probe;

    // The old-bound shapes are 413 (values) or 400 (embeddings inputs); the new-bound ones are parsed,
    // then 400 (schema), 404 (model) or 200 (the deep arrays, 100 levels in all, are forwarded).
    const perRound = [413, 413, 413, 413, 400, 413, 400, 404, 200, 400, 400, 400];
    expect(statuses).toEqual([...perRound, ...perRound]);
    for (const s of streams) {
      const { text } = await s.rest;
      expect(text).toContain('data: [DONE]');
      expect(text).not.toContain('"error"');
    }
    await gateway.settled();
    expect(gateway.output()).not.toMatch(/not renewed/);
    process.stdout.write(`longest /healthz during the bursts: ${Math.max(...probes).toFixed(0)} ms\n`);
    expect(Math.max(...probes)).toBeLessThan(1000);
    expect(upstream.stats().byModel['up-s1']?.aborted ?? 0).toBe(0);
  }, 60_000);

  /**
   * At the bound an operator raised 4× (`max_body_values: 2000000`), each body parsed costs ~4× as
   * much: twelve parsed back to back would hold the loop past the fencing limit; one per turn of the
   * event loop, the lease renewal runs between them.
   */
  it('parses one costly body per turn: twelve bodies of a raised bound (2M values) at once fence nobody', async () => {
    await fleet?.close();
    const yaml = burstYaml().replace(
      'gateway: { request_timeout_ms: 60000 }',
      'gateway: { request_timeout_ms: 60000, max_body_values: 2000000 }',
    );
    expect(yaml).toContain('max_body_values: 2000000');
    fleet = await startReplicaFleet(1, yaml, redis.url, upstream.url);
    const [gateway] = fleet.replicas;
    const streams = await Promise.all([
      openStream(gateway.url, 'single', { chunks: 120, chunk_gap_ms: 50 }),
      openStream(gateway.url, 'duo', { chunks: 120, chunk_gap_ms: 50 }),
    ]);
    const texts = [
      `{"model":"duo","messages":[${repeat('{}', 220_000)}]}`,
      `{"model":"duo","input":[${repeat('[]', 220_000)}]}`,
      chat(keys(98_000, 'big')).replace('"duo"', '"no-such-model"'),
      `{"model":"duo","messages":[${repeat('0', 1_900_000)}]}`,
    ];
    const bodies = Array.from({ length: 12 }, (_, i) => ({
      path: texts[i % 4].includes('"input"') ? '/v1/responses' : '/v1/chat/completions',
      body: gzipSync(texts[i % 4].replace('big', `big${i}`)),
    }));
    let probing = true;
    const probes: number[] = [];
    const probe = (async () => {
      while (probing) {
        const startedAt = performance.now();
        expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200);
        probes.push(performance.now() - startedAt);
        await new Promise((r) => setTimeout(r, 25));
      }
    })();
    const statuses = await Promise.all(
      bodies.map(async ({ path, body }) => {
        const res = await fetch(`${gateway.url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
          body,
        });
        await res.text();
        return res.status;
      }),
    );
    probing = false;
    await probe;
    expect(statuses).toEqual([400, 400, 404, 400, 400, 400, 404, 400, 400, 400, 404, 400]);
    for (const s of streams) {
      const { text } = await s.rest;
      expect(text).toContain('data: [DONE]');
      expect(text).not.toContain('"error"');
    }
    await gateway.settled();
    expect(gateway.output()).not.toMatch(/not renewed/);
    process.stdout.write(`longest /healthz during the raised-bound burst: ${Math.max(...probes).toFixed(0)} ms\n`);
    expect(Math.max(...probes)).toBeLessThan(1000);
  }, 60_000);
});
