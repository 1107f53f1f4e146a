import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { WORKSPACE_ROOT } from '../local-fleet';

/**
 * nx.json's inputs decide what `nx affected` runs. Each case makes a scratch commit on top of HEAD
 * that changes one file (with a private index: the working tree, the index and every ref stay as
 * they are) and asks `nx show projects --affected --base=HEAD --head=<scratch>`.
 */
describe('nx affected sets (nx.json inputs)', () => {
  let scratch: string;
  beforeAll(() => {
    scratch = mkdtempSync(path.join(tmpdir(), 'iop-affected-'));
  });
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  const git = (args: string[], opts: { env?: Record<string, string>; input?: string } = {}) =>
    execFileSync('git', args, {
      cwd: WORKSPACE_ROOT,
      encoding: 'utf8',
      input: opts.input,
      env: { ...process.env, ...opts.env },
    }).trim();

  /** A commit whose parent is HEAD and whose tree is HEAD's with `file` appended to. */
  const commitChanging = (file: string): string => {
    const env = { GIT_INDEX_FILE: path.join(scratch, `index-${file.replace(/\W/g, '_')}`) };
    git(['read-tree', 'HEAD'], { env });
    const blob = git(['hash-object', '-w', '--stdin'], {
      input: `${readFileSync(path.join(WORKSPACE_ROOT, file), 'utf8')}\n# scratch change\n`,
    });
    git(['update-index', '--add', '--cacheinfo', `100644,${blob},${file}`], { env });
    const tree = git(['write-tree'], { env });
    return git(['commit-tree', tree, '-p', 'HEAD', '-m', `scratch: ${file}`], {
      env: {
        GIT_AUTHOR_NAME: 'test',
        GIT_AUTHOR_EMAIL: 'test@localhost',
        GIT_COMMITTER_NAME: 'test',
        GIT_COMMITTER_EMAIL: 'test@localhost',
      },
    });
  };

  const affectedBy = (file: string): string[] => {
    const head = commitChanging(file);
    const out = execFileSync('npx', ['nx', 'show', 'projects', '--affected', '--base=HEAD', `--head=${head}`], {
      cwd: WORKSPACE_ROOT,
      encoding: 'utf8',
      env: { ...process.env, NX_DAEMON: 'false', NX_NO_CLOUD: 'true', NX_BASE: '', NX_HEAD: '' },
    });
    return out.trim().split('\n').filter(Boolean).sort();
  };

  it.each([
    // doc-citations reads every source, config and doc for the sections they cite (README.md, docs/).
    ['README.md', ['doc-citations', 'fleet']],
    ['docs/architecture.md', ['doc-citations']],
    [
      'examples/edge.yaml',
      ['doc-citations', 'edge-gateway', 'edge-gateway-e2e', 'fleet', 'status-exporter', 'status-exporter-e2e'],
    ],
    ['deploy/kubernetes/base/deployment.yaml', ['doc-citations', 'fleet']],
    ['deploy/haproxy/haproxy.cfg', ['doc-citations', 'fleet']],
    ['Dockerfile', ['doc-citations', 'fleet']],
    ['.github/workflows/ci.yml', ['doc-citations', 'fleet']],
    [
      'apps/edge-gateway/src/main.ts',
      ['bench', 'doc-citations', 'edge-gateway', 'edge-gateway-e2e', 'fleet', 'status-exporter-e2e'],
    ],
    [
      'libs/status/src/index.ts',
      [
        'bench',
        'doc-citations',
        'edge-gateway',
        'edge-gateway-e2e',
        'fleet',
        'status',
        'status-exporter',
        'status-exporter-e2e',
      ],
    ],
    ['tools/bench/src/main.ts', ['bench', 'doc-citations']],
  ])('a change to %s affects %j', (file, expected) => {
    expect(affectedBy(file)).toEqual(expected);
  });
});

/** Every project: each has a jest `test` target and an ESLint `lint` target. */
const ALL = [
  'bench',
  'dispatch',
  'doc-citations',
  'edge-gateway',
  'edge-gateway-e2e',
  'errors',
  'fake-upstream',
  'fleet',
  'runtime',
  'status',
  'status-exporter',
  'status-exporter-e2e',
  'validate',
];

/**
 * The files outside every project that tests, lint or the format check read: a change to one
 * alone must run what reads it (`nx show projects --affected --files=<file>`, as CI's `nx affected`).
 */
describe('nx affected sets of the files outside the projects (nx.json namedInputs)', () => {
  const affectedByFiles = (file: string): string[] =>
    execFileSync('npx', ['nx', 'show', 'projects', '--affected', `--files=${file}`], {
      cwd: WORKSPACE_ROOT,
      encoding: 'utf8',
      env: { ...process.env, NX_DAEMON: 'false', NX_NO_CLOUD: 'true', NX_BASE: '', NX_HEAD: '' },
    })
      .trim()
      .split('\n')
      .filter(Boolean)
      .sort();

  it.each([
    // Every jest config spreads it.
    ['jest.preset.js', ALL],
    ['tsconfig.base.json', ALL],
    ['package-lock.json', ALL],
    // Every project's ESLint config extends it; prettier's settings are part of lint (npm run lint).
    ['eslint.config.mjs', ALL],
    ['.prettierrc.json', ALL],
    // npm start; apps/edge-gateway-e2e/src/start-demo.spec.ts runs it. doc-citations reads every
    // source, config and doc for the sections they cite.
    ['tools/start-demo.mjs', ['doc-citations', 'edge-gateway-e2e']],
    [
      'examples/edge.yaml',
      ['doc-citations', 'edge-gateway', 'edge-gateway-e2e', 'fleet', 'status-exporter', 'status-exporter-e2e'],
    ],
    ['deploy/haproxy/haproxy.cfg', ['doc-citations', 'fleet']],
    ['deploy/local/edge.yaml', ['doc-citations', 'fleet']],
    // tools/fleet/src/docs (the Errors table), load-balancer and kubernetes specs read it.
    ['README.md', ['doc-citations', 'fleet']],
    ['docs/architecture.md', ['doc-citations']],
  ])('--files=%s affects %j', (file, expected) => {
    expect(affectedByFiles(file)).toEqual(expected);
  });
});

/**
 * nx.json's `production` input leaves out the test-only files of a project (`*.spec.ts`, `*.contract.ts`,
 * `testing/`): a change to one is no production change, so no build's cache misses for it. Whatever
 * compiles or runs them still reads them: tests and typechecks take `^testHelpers` (a dependency's
 * `testing/` helpers and contract suites), and the tools whose own source imports
 * `@iop/dispatch/testing` (bench, fleet: `freePort`) build with it.
 */
describe('resolved task inputs (nx.json production and testHelpers)', () => {
  const inputsOf = (target: string): Set<string> =>
    new Set(
      (
        JSON.parse(
          execFileSync('npx', ['nx', 'show', 'target', 'inputs', target, '--json'], {
            cwd: WORKSPACE_ROOT,
            encoding: 'utf8',
            env: { ...process.env, NX_DAEMON: 'false', NX_NO_CLOUD: 'true' },
          }),
        ) as { files: string[] }
      ).files,
    );
  const HELPER = 'libs/dispatch/src/testing/index.ts';
  const CONTRACT = 'libs/dispatch/src/queue/provider-queue.contract.ts';
  const OWN_HELPER = 'apps/edge-gateway/src/testing/budget-gateway.ts';

  it("a build reads no testing/ helper or contract suite, its own or a dependency's", () => {
    const build = inputsOf('edge-gateway:build');
    expect([HELPER, CONTRACT, OWN_HELPER].map((f) => [f, build.has(f)])).toEqual([
      [HELPER, false],
      [CONTRACT, false],
      [OWN_HELPER, false],
    ]);
    expect(build.has('libs/dispatch/src/index.ts')).toBe(true);
  });

  it.each(['edge-gateway:test', 'edge-gateway:typecheck', 'status-exporter-e2e:test', 'fleet:test', 'fleet:build'])(
    '%s reads the helpers and contract suites of its dependencies',
    (target) => {
      const inputs = inputsOf(target);
      expect([HELPER, CONTRACT].map((f) => [f, inputs.has(f)])).toEqual([
        [HELPER, true],
        [CONTRACT, true],
      ]);
    },
  );
});
