import { edgeConfigSchema, type EdgeConfigInput } from './schema';
import { checkSemantics } from './semantic-rules';

type NodeInput = EdgeConfigInput['nodes'][number];
const vllm = (id: string, enabled = true) => ({
  id,
  type: 'vllm' as const,
  base_url: 'http://10.0.0.5:8000/v1',
  enabled,
});
const cli = (id: string, enabled = true) => ({ id, type: 'cli' as const, command: ['my-llm'], enabled });
const pool = (id: string, adapter: string, models: string[], extra: object = {}) => ({
  id,
  category: 'vllm' as const,
  adapter,
  models,
  max_concurrency: 2,
  ...extra,
});
const direct = (id: string, adapter: string, models: string[], extra: object = {}) => ({
  id,
  category: 'cli' as const,
  adapter,
  models,
  ...extra,
});

function check(nodes: NodeInput[], routes: EdgeConfigInput['routes'] = []) {
  return checkSemantics(edgeConfigSchema.parse({ version: 1, nodes, routes })).map(({ path, message }) => ({
    path,
    message,
  }));
}

/** A table row: the rule it guards, the file's nodes and routes, and the problems expected (path → message fragment). */
type Row = [
  rule: string,
  nodes: NodeInput[],
  routes: EdgeConfigInput['routes'],
  expected: Array<[path: string, fragment: string]>,
];

function runTable(rows: Row[]) {
  it.each(rows)('%s', (_rule, nodes, routes, expected) => {
    const problems = check(nodes, routes);
    expect(problems).toHaveLength(expected.length);
    expected.forEach(([path, fragment], i) =>
      expect(problems[i]).toEqual({ path, message: expect.stringContaining(fragment) }),
    );
  });
}

describe('unique ids', () => {
  runTable([
    [
      'accepts distinct node, adapter and provider ids',
      [
        { id: 'a', adapters: [vllm('v')], providers: [pool('p', 'v', ['m'])] },
        { id: 'b', adapters: [vllm('v')], providers: [pool('q', 'v', ['m'])] },
      ],
      [],
      [],
    ],
    [
      'rejects two nodes with the same id',
      [{ id: 'a' }, { id: 'a' }],
      [],
      [['nodes[1].id', 'node id "a" is already used by nodes[0]']],
    ],
    [
      'rejects two adapters with the same id on one node',
      [{ id: 'a', adapters: [vllm('v'), cli('v')] }],
      [],
      [['nodes[0].adapters[1].id', 'adapter id "v" is already used by nodes[0].adapters[0]']],
    ],
    [
      'allows the same adapter id on different nodes',
      [
        { id: 'a', adapters: [vllm('v')] },
        { id: 'b', adapters: [vllm('v')] },
      ],
      [],
      [],
    ],
    [
      'rejects the same provider id on two different nodes',
      [
        { id: 'a', adapters: [vllm('v')], providers: [pool('p', 'v', ['m'])] },
        { id: 'b', adapters: [vllm('v')], providers: [pool('p', 'v', ['m'])] },
      ],
      [],
      [['nodes[1].providers[0].id', 'provider id "p" is already used by nodes[0].providers[0]']],
    ],
  ]);
});

describe('provider.adapter resolves on its own node', () => {
  runTable([
    ['accepts an exact adapter id', [{ id: 'a', adapters: [vllm('v')], providers: [pool('p', 'v', ['m'])] }], [], []],
    [
      'accepts a type name with exactly one enabled adapter of that type',
      [{ id: 'a', adapters: [vllm('v0'), vllm('v1', false)], providers: [pool('p', 'vllm', ['m'])] }],
      [],
      [],
    ],
    [
      'rejects an adapter id that is not defined on the node',
      [{ id: 'a', adapters: [vllm('v')], providers: [pool('p', 'v9', ['m'])] }],
      [],
      [['nodes[0].providers[0].adapter', 'adapter "v9" is not defined on node "a"']],
    ],
    [
      'rejects an adapter id defined only on another node',
      [
        { id: 'a', adapters: [vllm('v')] },
        { id: 'b', adapters: [vllm('w')], providers: [pool('p', 'v', ['m'])] },
      ],
      [],
      [['nodes[1].providers[0].adapter', 'adapter "v" is not defined on node "b"']],
    ],
    [
      'rejects an enabled provider pointing at a disabled adapter',
      [{ id: 'a', adapters: [vllm('v', false)], providers: [pool('p', 'v', ['m'])] }],
      [],
      [['nodes[0].providers[0].adapter', 'adapter "v" on node "a" is disabled, but provider "p" is enabled']],
    ],
    [
      'rejects an enabled provider whose type name has only disabled adapters',
      [{ id: 'a', adapters: [vllm('v', false)], providers: [pool('p', 'vllm', ['m'])] }],
      [],
      [['nodes[0].providers[0].adapter', 'every adapter of type "vllm" on node "a" is disabled']],
    ],
    [
      'accepts a disabled provider pointing at a disabled adapter',
      [{ id: 'a', adapters: [vllm('v', false)], providers: [pool('p', 'v', ['m'], { enabled: false })] }],
      [],
      [],
    ],
    [
      'rejects a provider pointing at an ambiguous type with two enabled adapters',
      [{ id: 'a', adapters: [vllm('v0'), vllm('v1')], providers: [pool('p', 'vllm', ['m'])] }],
      [],
      [['nodes[0].providers[0].adapter', 'adapter "vllm" is a type with 2 enabled adapters on node "a" (v0, v1)']],
    ],
  ]);

  it('lists the adapter ids in the fix for a missing adapter and names one to pick for an ambiguous type', () => {
    const problems = checkSemantics(
      edgeConfigSchema.parse({
        version: 1,
        nodes: [
          {
            id: 'a',
            adapters: [vllm('v0'), vllm('v1')],
            providers: [pool('p', 'v9', ['m']), pool('q', 'vllm', ['n'])],
          },
        ],
      }),
    );
    expect(problems.map((p) => p.fix)).toEqual(['use one of: v0, v1.', 'name one adapter id instead: v0 or v1.']);
  });
});

describe('category and concurrency', () => {
  runTable([
    [
      'rejects a category that differs from the resolved adapter type',
      [{ id: 'a', adapters: [cli('c')], providers: [pool('p', 'c', ['m'])] }],
      [],
      [['nodes[0].providers[0].category', 'category "vllm" does not match the type "cli" of adapter "c"']],
    ],
    [
      'rejects a pool provider without max_concurrency',
      [{ id: 'a', adapters: [vllm('v')], providers: [pool('p', 'v', ['m'], { max_concurrency: undefined })] }],
      [],
      [['nodes[0].providers[0].max_concurrency', 'has no max_concurrency']],
    ],
    [
      'rejects a pool provider with max_concurrency 0',
      [{ id: 'a', adapters: [vllm('v')], providers: [pool('p', 'v', ['m'], { max_concurrency: 0 })] }],
      [],
      [['nodes[0].providers[0].max_concurrency', 'is 0, below 1']],
    ],
    [
      'accepts a cli provider without max_concurrency',
      [{ id: 'a', adapters: [cli('c')], providers: [direct('p', 'c', ['m'])] }],
      [],
      [],
    ],
    [
      'rejects max_concurrency on a cli provider because it is a direct route, never queued',
      [{ id: 'a', adapters: [cli('c')], providers: [direct('p', 'c', ['m'], { max_concurrency: 1 })] }],
      [],
      [['nodes[0].providers[0].max_concurrency', 'a cli provider is a direct route, never queued']],
    ],
    [
      'rejects max_queued on a cli provider',
      [{ id: 'a', adapters: [cli('c')], providers: [direct('p', 'c', ['m'], { max_queued: 5 })] }],
      [],
      [['nodes[0].providers[0].max_queued', 'max_queued is not allowed on cli provider "p"']],
    ],
  ]);
});

describe('routes[] targets', () => {
  runTable([
    [
      'accepts a route to an existing node and adapter id',
      [{ id: 'laptop', adapters: [cli('codex')] }],
      [{ model: 'codex', node: 'laptop', adapter: 'codex' }],
      [],
    ],
    [
      'rejects a route to an unknown node',
      [{ id: 'laptop', adapters: [cli('codex')] }],
      [{ model: 'codex', node: 'desk', adapter: 'codex' }],
      [['routes[0].node', 'node "desk" is not defined']],
    ],
    [
      'rejects a route to an adapter that is not on that node',
      [
        { id: 'laptop', adapters: [cli('codex')] },
        { id: 'b', adapters: [cli('x')] },
      ],
      [{ model: 'codex', node: 'laptop', adapter: 'x' }],
      [['routes[0].adapter', 'adapter "x" is not defined on node "laptop"']],
    ],
  ]);
});

describe('a model is pooled or direct, never both', () => {
  const gpu = (providers: NodeInput['providers']): NodeInput => ({
    id: 'gpu',
    adapters: [vllm('v'), cli('c'), cli('d')],
    providers,
  });
  runTable([
    [
      'accepts one model served by several pool providers',
      [gpu([pool('p1', 'v', ['m']), pool('p2', 'v', ['m'])])],
      [],
      [],
    ],
    [
      'rejects a model served by a pool provider and a cli provider',
      [gpu([pool('p1', 'v', ['m']), direct('c1', 'c', ['m'])])],
      [],
      [
        [
          'nodes[0].providers[1].models[0]',
          'model "m" is pooled by pool provider "p1" and also served directly by cli provider "c1"',
        ],
      ],
    ],
    [
      'compares public model names, not upstream names',
      [gpu([pool('p1', 'v', ['m']), { ...direct('c1', 'c', []), models: [{ name: 'other', upstream: 'm' }] }])],
      [],
      [],
    ],
    [
      'rejects one model listed by two different cli providers',
      [gpu([direct('c1', 'c', ['m']), direct('c2', 'd', ['m'])])],
      [],
      [['nodes[0].providers[1].models[0]', 'model "m" already has a direct target, cli provider "c1"']],
    ],
    [
      'rejects one model routed to two different targets',
      [gpu([])],
      [
        { model: 'm', node: 'gpu', adapter: 'c' },
        { model: 'm', node: 'gpu', adapter: 'd' },
      ],
      [['routes[1].model', 'already has a direct target, route to gpu/c']],
    ],
    [
      'rejects a routes[] model that a pool provider already serves',
      [gpu([pool('p1', 'v', ['m'])])],
      [{ model: 'm', node: 'gpu', adapter: 'c' }],
      [
        [
          'routes[0].model',
          'model "m" is already served by catalog pool provider "p1" (nodes[0].providers[0].models[0])',
        ],
      ],
    ],
    [
      'rejects a routes[] model that a cli catalog provider already serves',
      [gpu([direct('c1', 'c', ['m'])])],
      [{ model: 'm', node: 'gpu', adapter: 'd' }],
      [['routes[0].model', 'already served by catalog cli provider "c1"']],
    ],
    [
      'counts a disabled provider as serving its models',
      [gpu([pool('p1', 'v', ['m'], { enabled: false }), direct('c1', 'c', ['m'])])],
      [],
      [['nodes[0].providers[1].models[0]', 'model "m" is pooled by pool provider "p1"']],
    ],
  ]);
});
