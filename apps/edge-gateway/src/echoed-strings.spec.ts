import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';
import { PATHS, yaml, type Endpoint } from './testing/upstream-behaviour';

/**
 * README "Errors": every string a client sends that an error echoes (in its message or its `param`)
 * is bounded, on every endpoint and adapter family: a 100 KB unknown field, enum value (`type`,
 * `role`), model id, or field name in a `param` path costs the answer well under 1 KB.
 */

const L = 'Q'.repeat(100_000);
/** A value nested past the depth limit: the 400 names the top-level field holding it. */
const tooDeep = (): unknown => {
  let v: unknown = 1;
  for (let i = 0; i < 101; i++) v = [v];
  return v;
};

/** The models of `yaml()`: one per adapter family. */
const FAMILIES = { vllm: 'vm', ollama: 'om', openai_compat: 'cm', cli: 'echo' } as const;

type Case = [what: string, body: (model: string) => Record<string, unknown>, erring: (family: string) => boolean];
const all = () => true;
const user = [{ role: 'user', content: 'x' }];

const CASES: Record<Endpoint, Case[]> = {
  chat: [
    ['unknown key', (model) => ({ model, messages: user, [L]: 1 }), (f) => f === 'cli'],
    ['model', () => ({ model: L, messages: user }), all],
    ['role', (model) => ({ model, messages: [{ role: L, content: 'x' }] }), all],
    [
      'content part type',
      (model) => ({ model, messages: [{ role: 'user', content: [{ type: L, text: 'x' }] }] }),
      (f) => f === 'cli',
    ],
    ['param path (too deep)', (model) => ({ model, messages: user, [L]: tooDeep() }), all],
  ],
  responses: [
    ['unknown key', (model) => ({ model, input: 'x', [L]: 1 }), (f) => f === 'cli'],
    ['model', () => ({ model: L, input: 'x' }), all],
    ['input item type', (model) => ({ model, input: [{ type: L, role: 'user', content: 'x' }] }), (f) => f === 'cli'],
    ['input item role', (model) => ({ model, input: [{ role: L, content: 'x' }] }), all],
    [
      'text.format.type',
      (model) => ({ model, input: 'x', text: { format: { type: L } } }),
      (f) => f === 'cli' || f === 'ollama',
    ],
    ['text.verbosity', (model) => ({ model, input: 'x', text: { verbosity: L } }), (f) => f === 'ollama'],
    ['param path (too deep)', (model) => ({ model, input: 'x', [L]: tooDeep() }), all],
  ],
  embeddings: [
    ['unknown key', (model) => ({ model, input: 'x', [L]: 1 }), (f) => f === 'cli'],
    ['model', () => ({ model: L, input: 'x' }), all],
    ['encoding_format', (model) => ({ model, input: 'x', encoding_format: L }), (f) => f === 'cli' || f === 'ollama'],
    ['param path (too deep)', (model) => ({ model, input: 'x', [L]: tooDeep() }), all],
  ],
};

describe('every client string an error echoes is bounded (README "Errors")', () => {
  let up: FakeUpstream;
  let gateway: TestGateway;

  beforeAll(async () => {
    up = await startFakeUpstream({ name: 'up' });
    gateway = await startTestGateway(yaml(), { ORIGIN: up.origin, BAD: up.origin, GOOD: up.origin });
  });
  afterAll(async () => {
    await gateway?.close();
    await up?.close();
  });

  const cases = (Object.keys(CASES) as Endpoint[]).flatMap((endpoint) =>
    Object.entries(FAMILIES).flatMap(([family, model]) =>
      CASES[endpoint].map(([what, body, erring]) => [endpoint, family, what, body(model), erring(family)] as const),
    ),
  );

  it.each(cases)('%s, %s model: a 100 KB %s', async (endpoint, _family, _what, body, erring) => {
    const res = await fetch(`${gateway.url}${PATHS[endpoint]}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    if (erring) expect(res.status).toBeGreaterThanOrEqual(400);
    if (res.status >= 400) {
      expect({ status: res.status, bytes: Buffer.byteLength(text) < 1024 }).toEqual({
        status: res.status,
        bytes: true,
      });
      const { error } = JSON.parse(text) as { error: { message: string; param: string | null } };
      expect(error.param === null || error.param.length <= 230).toBe(true);
      if (text.includes('QQQ')) expect(text).toMatch(/Q{199,200}…\(\d+ more characters\)/);
    }
  });
});
