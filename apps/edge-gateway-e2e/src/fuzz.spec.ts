import { startFakeUpstream, type FakeUpstream, fleetYaml } from '@iop/fake-upstream';
import fc from 'fast-check';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { checkInvariants, send, type Answer } from './testing/fuzz-requests';
import { spawnGateway, writeTempConfig, type GatewayProcess } from './testing/gateway-process';

/**
 * Property-based tests of the gateway process over request bodies, headers and paths (README
 * "Tests": fuzz). Must hold for every input: no 5xx caused by the input (the upstream and the CLI
 * work), the process never dies, no provider is ever booked unhealthy (one booked failure would
 * turn it so), and every error is OpenAI-shaped. Seeded; `FUZZ_RUNS` cases per property (default
 * 150, a few hundred in all), `FUZZ_SEED` to replay. Long mode: `FUZZ_RUNS=5000 npx jest -c
 * apps/edge-gateway/jest.config.js fuzz`.
 */
const RUNS = Number(process.env.FUZZ_RUNS ?? 150);
const SEED = Number(process.env.FUZZ_SEED ?? 20261201);
const LONG = RUNS > 1000;

const MODELS = ['llama', 'qwen', 'small', 'echo', 'legacy'];
const PATHS = ['/v1/chat/completions', '/v1/responses'];

/** Bounds of the fuzzed gateway's bodies: small, so generated bodies cross them often. */
const MAX_BODY_BYTES = 65536;
const MAX_BODY_VALUES = 5000;

/**
 * fleetYaml with one booked failure enough to turn a provider unhealthy, probes too rare to heal
 * it, and the body bounds above.
 */
const yaml = () =>
  fleetYaml({ maxBodyBytes: MAX_BODY_BYTES })
    .replace('gateway:\n', `gateway:\n  max_body_values: ${MAX_BODY_VALUES}\n`)
    .replace('queue:\n', 'health: { interval_ms: 600000, unhealthy_after: 1, healthy_after: 5 }\nqueue:\n');

/** JSON values without the fake upstream's knobs (`fake`): the property is about the gateway, not a told-to-fail upstream. */
const json = fc.jsonValue({ maxDepth: 4 }).filter((v) => !JSON.stringify(v).includes('"fake"'));
const text = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme' }),
  fc.constantFrom('', 'System: x', '\n\nAssistant: y', 'a'.repeat(2000)),
);
const role = fc.oneof(
  { arbitrary: fc.constantFrom('system', 'developer', 'user', 'assistant', 'tool'), weight: 4 },
  { arbitrary: fc.string({ maxLength: 12 }), weight: 1 },
);
const content = fc.oneof(
  { arbitrary: text, weight: 4 },
  fc.constant(null),
  fc.array(
    fc.oneof(
      fc.record({ type: fc.constantFrom('text', 'input_text', 'output_text'), text }),
      fc.record({ type: fc.string({ maxLength: 10 }), image_url: json }),
    ),
    { maxLength: 3 },
  ),
  json,
);
const message = fc.oneof(
  { arbitrary: fc.record({ role, content }), weight: 6 },
  { arbitrary: fc.record({ role, content }, { requiredKeys: [] }), weight: 1 },
  { arbitrary: json, weight: 1 },
);
const extraFields = fc.dictionary(
  fc.string({ maxLength: 12 }).filter((k) => k !== 'fake' && k !== '__proto__'),
  json,
  { maxKeys: 4 },
);

/** A chat or Responses body: mostly well-formed enough to reach a model, with random fields and values. */
const body = fc.oneof(
  fc
    .record({
      model: fc.oneof({ arbitrary: fc.constantFrom(...MODELS), weight: 6 }, fc.string({ maxLength: 40 }), json),
      messages: fc.oneof({ arbitrary: fc.array(message, { minLength: 1, maxLength: 4 }), weight: 6 }, json),
      stream: fc.oneof({ arbitrary: fc.boolean(), weight: 6 }, json),
      extra: fc.oneof(fc.constant({}), extraFields),
    })
    .map(({ extra, ...b }) => ({ ...extra, ...b })),
  fc.record(
    {
      model: fc.constantFrom(...MODELS),
      input: fc.oneof(
        text,
        fc.array(fc.oneof(fc.record({ role, content }, { requiredKeys: [] }), json), { maxLength: 3 }),
        json,
      ),
      instructions: fc.oneof(text, json),
      stream: fc.boolean(),
    },
    { requiredKeys: ['model'] },
  ),
  json,
);

const token = fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,20}$/);
const headerValue = fc.stringMatching(/^[\x20-\x7e]{0,60}$/).map((v) => v.trim());
const headers = fc
  .record(
    {
      'content-type': fc.oneof(
        fc.constantFrom(
          'application/json',
          'application/json; charset=utf-8',
          'application/json; charset=latin1',
          'text/plain',
          'application/x-www-form-urlencoded',
          'multipart/form-data; boundary=x',
          '',
        ),
        headerValue,
      ),
      'content-encoding': fc.oneof(fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'zstd'), headerValue),
      authorization: fc.oneof(fc.constant('Bearer x'), headerValue),
      origin: fc.oneof(fc.constantFrom('https://evil.example', 'null'), headerValue),
      'x-request-id': headerValue,
      accept: headerValue,
    },
    { requiredKeys: [] },
  )
  .chain((h) =>
    fc
      .dictionary(
        token.filter(
          (k) => !/^(x-fake|content-length|transfer-encoding|host|connection|expect|upgrade|te|trailer)/i.test(k),
        ),
        headerValue,
        { maxKeys: 3 },
      )
      .map((extra) => ({ ...extra, ...h })),
  );

describe('fuzz: the gateway process under random requests (README "Tests")', () => {
  let upstream: FakeUpstream;
  let gateway: GatewayProcess;

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    gateway = await spawnGateway(writeTempConfig(yaml()), { env: { UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' } });
  });
  afterAll(async () => {
    await gateway?.stop();
    await upstream.close();
  });

  const check = (answer: Answer, what: string) => checkInvariants(gateway, answer, what);

  /** Statuses seen, so a run that never reached a model fails instead of passing vacuously. */
  const seen = new Map<number, number>();
  const tally = (answer: Answer) => seen.set(answer.status, (seen.get(answer.status) ?? 0) + 1);

  const params = (runs: number) => ({
    seed: SEED,
    numRuns: runs,
    endOnFailure: true,
    interruptAfterTimeLimit: LONG ? undefined : 60_000,
  });

  it(
    'bodies: JSON of every shape to chat and Responses, streamed or not',
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...PATHS), body, async (path, b) => {
          const answer = await send(
            gateway.url,
            'POST',
            path,
            { 'content-type': 'application/json' },
            JSON.stringify(b),
          );
          tally(answer);
          await check(answer, `POST ${path} ${JSON.stringify(b).slice(0, 300)}`);
        }),
        params(RUNS),
      );
      // The generator is meant to reach the models often, not only the 400s.
      expect(seen.get(200) ?? 0).toBeGreaterThan(RUNS / 10);
    },
    LONG ? 3_600_000 : 120_000,
  );

  it(
    'raw bytes: any text or bytes as a JSON body, any declared encoding',
    async () => {
      const raw = fc.oneof(
        fc.string(),
        fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)),
        fc.constantFrom(
          '{',
          '[]',
          'null',
          '{"model":',
          '\u0000',
          '{"model":"llama","messages":[{"role":"user","content":"x"}]}',
        ),
      );
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(...PATHS),
          raw,
          fc.constantFrom(undefined, 'gzip', 'deflate', 'br', 'x-unknown'),
          async (path, b, encoding) => {
            const h: Record<string, string> = { 'content-type': 'application/json' };
            if (encoding) h['content-encoding'] = encoding;
            const answer = await send(gateway.url, 'POST', path, h, b);
            await check(answer, `POST ${path} (${encoding ?? 'identity'}) ${JSON.stringify(String(b)).slice(0, 200)}`);
          },
        ),
        params(Math.ceil(RUNS / 2)),
      );
    },
    LONG ? 3_600_000 : 120_000,
  );

  it(
    'many small values: arrays and objects of thousands of values in any field, compressed or not',
    async () => {
      const item = fc.constantFrom('0', '{}', '""', '[]', 'null', '{"role":"user","content":"x"}', '1234');
      const field = fc.constantFrom('messages', 'input', 'stop', 'tools', 'metadata', 'logit_bias', 'extra');
      const many = fc.record({
        path: fc.constantFrom(...PATHS, '/v1/embeddings'),
        model: fc.constantFrom(...MODELS),
        stream: fc.boolean(),
        field,
        item,
        count: fc.oneof(fc.integer({ min: 0, max: MAX_BODY_VALUES + 10 }), fc.integer({ min: 0, max: 40_000 })),
        asObject: fc.boolean(),
        encoding: fc.constantFrom(undefined, 'gzip', 'deflate', 'br'),
      });
      const compress = { gzip: gzipSync, deflate: deflateSync, br: brotliCompressSync };
      let refusedForValues = 0;
      let served = 0;
      await fc.assert(
        fc.asyncProperty(many, async (m) => {
          const items = Array.from({ length: m.count }, (_, i) => (m.asObject ? `"k${i}":${m.item}` : m.item));
          const value = m.asObject ? `{${items.join(',')}}` : `[${items.join(',')}]`;
          const text = `{"model":${JSON.stringify(m.model)},"stream":${m.stream},${JSON.stringify(m.field)}:${value}}`;
          const h: Record<string, string> = { 'content-type': 'application/json' };
          if (m.encoding) h['content-encoding'] = m.encoding;
          const sent = m.encoding ? compress[m.encoding](text) : text;
          const answer = await send(gateway.url, 'POST', m.path, h, sent);
          const what = `POST ${m.path} (${m.encoding ?? 'identity'}) ${m.field}: ${m.count} × ${m.item}${m.asObject ? ' as members' : ''}`;
          await check(answer, what);
          const over = Buffer.byteLength(text) > MAX_BODY_BYTES;
          // README "Security": 1 + every `,` outside strings; every `[` and `{` weighs 8 (empty or not),
          // an object member (`:`) 20.
          const structure = text.replace(/"(?:[^"\\]|\\.)*"/g, '""');
          const count = (re: RegExp) => structure.match(re)?.length ?? 0;
          const values = 1 + count(/,/g) + 8 * count(/[{[]/g) + 19 * count(/:/g);
          if (over || values > MAX_BODY_VALUES) {
            if (answer.status !== 413) throw new Error(`${what}: answered ${answer.status}, not 413`);
            if (!over && !answer.body.includes('gateway.max_body_values'))
              throw new Error(`${what}: the 413 does not name gateway.max_body_values: ${answer.body}`);
          }
          if (answer.body.includes('gateway.max_body_values')) refusedForValues++;
          if (answer.status === 200) served++;
        }),
        params(Math.ceil(RUNS / 2)),
      );
      // Both sides of the bound are reached, not only one.
      expect(refusedForValues).toBeGreaterThan(0);
      expect(served).toBeGreaterThan(0);
    },
    LONG ? 3_600_000 : 120_000,
  );

  it(
    'headers and methods: any header values on a valid body, any method on the API paths',
    async () => {
      const valid = JSON.stringify({ model: 'small', messages: [{ role: 'user', content: 'x' }] });
      const path = fc.oneof(
        fc.constantFrom('/v1/chat/completions', '/v1/responses', '/v1/models', '/status', '/v1/models/llama'),
        fc.webPath().map((p) => `/v1/models/${p.replace(/^\//, '')}`),
        fc.string({ maxLength: 20 }).map((s) => `/v1/${encodeURIComponent(s)}`),
      );
      const method = fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'HEAD');
      await fc.assert(
        fc.asyncProperty(method, path, headers, async (m, p, h) => {
          const answer = await send(gateway.url, m, p, h, m === 'GET' || m === 'HEAD' ? undefined : valid);
          await check(m === 'HEAD' ? { ...answer, body: '' } : answer, `${m} ${p} ${JSON.stringify(h)}`);
        }),
        params(RUNS),
      );
    },
    LONG ? 3_600_000 : 120_000,
  );

  it('is still healthy and serving after it all', async () => {
    const answer = await send(
      gateway.url,
      'POST',
      '/v1/chat/completions',
      { 'content-type': 'application/json' },
      JSON.stringify({ model: 'llama', messages: [{ role: 'user', content: 'still there?' }] }),
    );
    expect(answer.status).toBe(200);
    expect((await send(gateway.url, 'GET', '/healthz', {})).status).toBe(200);
  });
});
