import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatProblems } from './config-problem';
import { parseConfigText } from './load-config';
import { edgeConfigSchema, type EdgeConfigInput } from './schema';
import { checkSemantics } from './semantic-rules';

const gpu = (providers: NonNullable<EdgeConfigInput['nodes'][number]['providers']>) => ({
  id: 'gpu',
  adapters: [
    { id: 'v', type: 'vllm' as const, base_url: 'http://10.0.0.5:8000/v1' },
    { id: 'c', type: 'cli' as const, command: ['my-llm'] },
  ],
  providers,
});
type Models = EdgeConfigInput['nodes'][number]['providers'] extends (infer P)[] | undefined
  ? P extends { models: infer M }
    ? M
    : never
  : never;
const pool = (id: string, models: Models) => ({
  id,
  category: 'vllm' as const,
  adapter: 'v',
  models,
  max_concurrency: 2,
});
const direct = (id: string, models: Models) => ({ id, category: 'cli' as const, adapter: 'c', models });

function check(nodes: EdgeConfigInput['nodes'], routes: EdgeConfigInput['routes'] = []) {
  return checkSemantics(edgeConfigSchema.parse({ version: 1, nodes, routes }));
}

/** README "Pooled and direct routes": one entry per model and place it is served from, or one would be ignored. */
describe('a model listed twice in one place', () => {
  it.each([
    [
      'a pool provider, once by name and once with another upstream',
      pool('p', ['m', { name: 'm', upstream: 'other' }]),
    ],
    ['a pool provider, the same name twice', pool('p', ['m', 'n', 'm'])],
    ['a cli provider', direct('p', [{ name: 'm', upstream: 'a' }, 'm'])],
  ])('is an error in %s, at the later entry and naming the first', (_what, provider) => {
    const problems = check([gpu([provider])]);
    const later = provider.models.length - 1;
    expect(problems).toEqual([
      {
        path: `nodes[0].providers[0].models[${later}]`,
        message: `model "m" is listed twice by provider "p" (models[0] and models[${later}]); only the first entry would be used`,
        fix: expect.stringContaining('keep one entry for "m"'),
      },
    ]);
  });

  it('allows one model in two providers of a pool, and the same upstream name under two public names', () => {
    expect(check([gpu([pool('p', ['m']), pool('q', ['m', { name: 'n', upstream: 'm' }])])])).toEqual([]);
  });

  it('is an error for a route written twice to one target, at the later one', () => {
    const routes = [
      { model: 'm', node: 'gpu', adapter: 'c' },
      { model: 'm', node: 'gpu', adapter: 'c', upstream: 'other' },
    ];
    expect(check([gpu([])], routes)).toEqual([
      {
        path: 'routes[1].model',
        message: 'model "m" is already routed to gpu/c by routes[0]; only the first route would be used',
        fix: 'remove this route, or merge its upstream into the first one.',
      },
    ]);
  });

  it('is printed with the file, line and column of the later entry and a fix', () => {
    const example = readFileSync(join(__dirname, 'testing/design-example.yaml'), 'utf8');
    const text = example.replace(
      'models: [llama-3.1-8b] ',
      'models: [llama-3.1-8b, {name: llama-3.1-8b, upstream: x}] ',
    );
    const result = parseConfigText(text, { EDGE_API_KEY: 'client-key-0001', VLLM_KEY: 'sk-vllm-1' });
    if (result.ok) throw new Error('expected the duplicate model to be refused');
    expect(formatProblems('edge.yaml', result.problems)).toBe(
      'edge.yaml:38:32 nodes[0].providers[0].models[1]: model "llama-3.1-8b" is listed twice by provider "gpu-a-llama" ' +
        '(models[0] and models[1]); only the first entry would be used. Fix: keep one entry for "llama-3.1-8b": remove ' +
        'this one, or put the upstream name you want in models[0] ({name: llama-3.1-8b, upstream: <upstream name>}).',
    );
  });
});
