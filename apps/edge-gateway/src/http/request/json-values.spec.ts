import { parseConfigText } from '@iop/validate';
import { ARRAY_WEIGHT, JsonValueCounter, MEMBER_WEIGHT, OBJECT_WEIGHT } from './json-values';

const A = ARRAY_WEIGHT;
const O = OBJECT_WEIGHT;
const M = MEMBER_WEIGHT - 1;
/** `gateway.max_body_values` when the file does not set it. */
const DEFAULT_BOUND = (() => {
  const loaded = parseConfigText(
    'version: 1\nnodes:\n  - id: n\n    adapters: [{ id: a, type: vllm, base_url: "http://127.0.0.1:1" }]\n    providers: [{ id: p, category: vllm, adapter: a, models: [m], max_concurrency: 1 }]\n',
    {},
    'edge.yaml',
  );
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
  return loaded.config.gateway.max_body_values;
})();

/** The count of `text` fed in pieces of `size` bytes (every split point of an escape is then met). */
function countOf(text: string, size = Infinity): number {
  const counter = new JsonValueCounter();
  const bytes = Buffer.from(text);
  for (let at = 0; at < bytes.length; at += size) counter.feed(bytes.subarray(at, at + size), Infinity);
  return counter.count;
}

const repeat = (item: string, n: number) => new Array<string>(n).fill(item).join(',');
const keys = (n: number, value = '0') => Array.from({ length: n }, (_, i) => `"k${i}":${value}`).join(',');
/** A chat body whose extra field `x` is `value`. */
const chatWith = (value: string) => `{"model":"m","messages":[{"role":"user","content":"x"}],"x":${value}}`;

describe('JsonValueCounter: an upper bound of a body’s cost, counted on its bytes before JSON.parse', () => {
  it.each([
    ['a scalar', '5', 1],
    ['an empty object: every container weighs, empty or not', '{}', 1 + O],
    ['an empty array', '[]', 1 + A],
    ['an array of three', '[1,2,3]', 1 + A + 2],
    ['an object of two members: each weighs MEMBER_WEIGHT', '{"a":1,"b":[1,2,3]}', 1 + O + 1 + 2 * M + A + 2],
    ['commas, colons, brackets and braces inside strings do not count', '{"a":"[{,:,}]","b":"x"}', 2 + O + 2 * M],
    ['an escaped quote does not end a string', '{"a":"x\\",[:,","b":1}', 2 + O + 2 * M],
    ['an escaped backslash before the closing quote ends it', '{"a":"x\\\\","b":[1]}', 2 + O + 2 * M + A],
    ['unicode escapes and multi-byte text', '{"a":"\\u0022,é,😀","b":1}', 2 + O + 2 * M],
    ['a million zeros', `[${repeat('0', 1_000_000)}]`, A + 1_000_000],
  ])('%s', (_what, text, count) => {
    expect(countOf(text)).toBe(count);
    // Fed byte by byte, in threes and in sevens: the same count, escapes split across chunks included.
    for (const size of [1, 3, 7]) expect(countOf(text, size)).toBe(count);
  });

  it('never counts less than the elements, weighted members and weighted containers JSON.parse builds', () => {
    const samples = [
      { model: 'm', messages: [{ role: 'user', content: 'a, [b] {c} "d" \\e' }], stop: ['', ',', '"'] },
      { input: [[1, 2, 3], [4], []], nested: { a: { b: { c: [] } } }, empty: {} },
    ];
    const weight = (v: unknown): number => {
      if (v === null || typeof v !== 'object') return 1;
      const children = Object.values(v).reduce((n: number, c) => n + weight(c) + (Array.isArray(v) ? 0 : M), 0);
      return (Array.isArray(v) ? A : O) + children;
    };
    for (const sample of samples) expect(countOf(JSON.stringify(sample))).toBeGreaterThanOrEqual(weight(sample));
  });

  it('says false as soon as the count passes the limit', () => {
    const counter = new JsonValueCounter();
    expect(counter.feed(Buffer.from('[1,2,3'), A + 3)).toBe(true);
    expect(counter.feed(Buffer.from(',4,5,6]'), A + 3)).toBe(false);
    expect(counter.count).toBe(A + 4);
  });

  // The shapes a red-team pass sent as 807-byte gzip bodies, each 100-200× a normal request's CPU
  // under the old weights (empty containers weighing 1, members 10): every one is now over the default.
  it.each([
    ['245,000 empty objects', chatWith(`[${repeat('{}', 245_000)}]`)],
    ['245,000 empty arrays', chatWith(`[${repeat('[]', 245_000)}]`)],
    ['160,000 pairs [0,0]', chatWith(`[${repeat('[0,0]', 160_000)}]`)],
    ['49,000 top-level keys', `{"model":"m","messages":[{"role":"user","content":"x"}],${keys(49_000)}}`],
    ['4,000 arrays nested 98 deep', chatWith(`[${repeat(`${'['.repeat(98)}${']'.repeat(98)}`, 4000)}]`)],
    ['100,000 one-key objects, every key new', chatWith(`[${keys(100_000).replace(/("k\d+":0)/g, '{$1}')}]`)],
  ])('%s: over the default bound', (_what, text) => {
    expect(countOf(text)).toBeGreaterThan(DEFAULT_BOUND);
  });

  it('admits at the default bound fewer than 63,000 containers or 25,000 members, whatever their shape', () => {
    // The most of each kind a body at the bound can hold: each then costs about what a `0,` does.
    expect(countOf(chatWith(`[${repeat('{}', 63_000)}]`))).toBeGreaterThan(DEFAULT_BOUND);
    expect(countOf(chatWith(`[${repeat('[]', 63_000)}]`))).toBeGreaterThan(DEFAULT_BOUND);
    expect(countOf(chatWith(`{${keys(25_000)}}`))).toBeGreaterThan(DEFAULT_BOUND);
  });

  it.each([
    ['2048 embeddings inputs of 200 token ids', `{"model":"m","input":[${repeat(`[${repeat('50256', 200)}]`, 2048)}]}`],
    [
      'a 128k-token chat prompt as text',
      `{"model":"m","messages":[{"role":"user","content":${JSON.stringify('token '.repeat(128_000))}}]}`,
    ],
    ['a chat of 5,000 messages', `{"model":"m","messages":[${repeat('{"role":"user","content":"hello"}', 5000)}]}`],
    [
      '128 tools of 20-member JSON Schemas',
      `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[${repeat(
        `{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{${keys(20, '{"type":"string"}')}}}}}`,
        128,
      )}]}`,
    ],
  ])('%s: within the default bound', (_what, text) => {
    expect(countOf(text)).toBeLessThanOrEqual(DEFAULT_BOUND);
  });
});
