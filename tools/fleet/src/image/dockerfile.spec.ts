import { startRedis, freePort, uniquePrefix, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { validate as dockerfileUtilsValidate } from 'dockerfile-utils';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { WORKSPACE_ROOT } from '../local-fleet';
import { copyFrom, parseStages, reproduceRuntimeStage, type RuntimeImage } from './runtime-stage';

// dockerfilelint ships no types; `run(configDir, text)` returns its findings.
const dockerfilelint = require('dockerfilelint') as {
  run(configDir: string, content: string): { line: number; title: string; description: string }[];
};

const DOCKERFILE = readFileSync(path.join(WORKSPACE_ROOT, 'Dockerfile'), 'utf8');
const PACKAGE = JSON.parse(readFileSync(path.join(WORKSPACE_ROOT, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
const stages = parseStages(DOCKERFILE);
const args = (keyword: string, stage = stages.at(-1)!) =>
  stage.instructions.filter((i) => i.getKeyword() === keyword).map((i) => i.getArguments().map((a) => a.getValue()));

describe('Dockerfile', () => {
  it('has no finding from dockerfilelint or dockerfile-utils', () => {
    expect(dockerfilelint.run(WORKSPACE_ROOT, DOCKERFILE)).toEqual([]);
    expect(dockerfileUtilsValidate(DOCKERFILE).map((d) => `line ${d.range.start.line + 1}: ${d.message}`)).toEqual([]);
  });

  it('builds in a Node 20 stage and runs a Node 20 stage as a non-root user under tini, exposing the gateway and exporter ports', () => {
    expect(stages.map((s) => s.name)).toEqual(['build', 'runtime']);
    for (const stage of stages) expect(stage.image).toMatch(/^node:20[-.]/);
    expect(stages[0].image).toBe(stages[1].image);
    expect(args('USER')).toEqual([['node']]);
    expect(args('EXPOSE').flat()).toEqual(['8080', '9464']);
  });

  it('copies every npm workspace manifest into both stages, so npm ci matches the lock file', () => {
    const workspaces = (
      JSON.parse(execFileSync('npm', ['query', '.workspace'], { cwd: WORKSPACE_ROOT, encoding: 'utf8' })) as {
        location: string;
      }[]
    ).map((w) => `${w.location}/package.json`);
    expect(workspaces.length).toBeGreaterThan(0);
    for (const stage of stages) {
      const copied = args('COPY', stage)
        .filter((a) => a.length === 2 && a[0].endsWith('/package.json'))
        .map((a) => a[0]);
      expect({ stage: stage.name, copied: copied.sort() }).toEqual({ stage: stage.name, copied: workspaces.sort() });
    }
  });

  it('builds exactly the projects whose dist/ the runtime stage copies', () => {
    const build = args('RUN', stages[0]).find((a) => a.includes('run-many'))!;
    const projects = build.slice(build.indexOf('-p') + 1).filter((a) => !a.startsWith('-'));
    const copied = stages[1].instructions
      .filter((i) => i.getKeyword() === 'COPY' && copyFrom(i) !== undefined)
      .map((i) => path.basename(i.getArguments()[0].getValue()));
    expect(copied.sort()).toEqual(projects.sort());
  });

  it('.dockerignore keeps dependencies, builds and the git directory out of the build context', () => {
    const ignored = readFileSync(path.join(WORKSPACE_ROOT, '.dockerignore'), 'utf8').split('\n');
    for (const entry of ['**/node_modules', 'dist', '.git', '.nx', 'tmp']) expect(ignored).toContain(entry);
  });
});

/**
 * The image cannot be built here (no Docker engine), so the runtime stage is reproduced in a
 * temporary directory from the Dockerfile itself (`reproduceRuntimeStage`): its COPY lines, its
 * `npm ci --omit=dev`, its ENV, ENTRYPOINT and CMD. Then the gateway and the exporter start from
 * there, as the image would start them, and serve.
 */
describe('the image runtime stage, reproduced without Docker', () => {
  let dir: string;
  let image: RuntimeImage;
  let redis: TestRedis;
  const children: ChildProcess[] = [];
  let upstream: FakeUpstream | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'iop-image-'));
    image = reproduceRuntimeStage(WORKSPACE_ROOT, DOCKERFILE, path.join(dir, 'app'));
    redis = await startRedis();
  }, 120_000);
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await upstream?.close();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('installs tini (PID 1, the ENTRYPOINT) and bubblewrap (the CLI sandbox) with apt-get, with the gateway as the default command', () => {
    expect(image.aptPackages).toEqual(['tini', 'bubblewrap']);
    expect(image.entrypoint).toEqual(['/usr/bin/tini', '--']);
    expect(image.cmd.slice(0, 1)).toEqual(['edge-gateway']);
    expect(image.commands.filter((c) => c.reproduced).map((c) => c.command)).toEqual([
      'npm ci --omit=dev --no-audit --no-fund',
      'rm -rf node_modules/typescript',
    ]);
  });

  it('holds the built dist/ and the production dependencies only: no devDependency, no source', () => {
    const installed = new Set(
      readdirSync(path.join(image.dir, 'node_modules')).flatMap((d) =>
        d.startsWith('@') ? readdirSync(path.join(image.dir, 'node_modules', d)).map((n) => `${d}/${n}`) : [d],
      ),
    );
    for (const dep of Object.keys(PACKAGE.dependencies)) expect(installed).toContain(dep);
    expect(Object.keys(PACKAGE.devDependencies).filter((dep) => installed.has(dep))).toEqual([]);
    expect(existsSync(path.join(image.dir, 'dist/apps/edge-gateway/main.js'))).toBe(true);
    expect(existsSync(path.join(image.dir, 'dist/apps/status-exporter/main.js'))).toBe(true);
    const sources = execFileSync('find', ['.', '-path', './node_modules', '-prune', '-o', '-name', '*.ts', '-print'], {
      cwd: image.dir,
      encoding: 'utf8',
    }).trim();
    expect(sources).toBe('');
  });

  it('starts the gateway (CMD) and the exporter (second entrypoint) from the stage; they serve a pooled, a CLI and a status request, and drain on SIGTERM through tini', async () => {
    const tini = image.entrypoint[0];
    if (!existsSync(tini))
      throw new Error(
        `${tini} not found: install the Debian package tini (apt-get install -y tini), as the image does`,
      );
    const [upstreamPort, gatewayPort, exporterPort] = [await freePort(), await freePort(), await freePort()];
    // The image holds no upstream: a test fake stands in for the vLLM server next to it.
    upstream = await startFakeUpstream({ host: '127.0.0.1', port: upstreamPort, name: 'demo' });
    const prefix = uniquePrefix('image');
    const config = path.join(dir, 'edge.yaml');
    writeFileSync(
      config,
      [
        'version: 1',
        `queue: { backend: redis, prefix: "${prefix}" }`,
        'nodes:',
        '  - id: node-1',
        '    adapters:',
        `      - { id: gpu, type: vllm, base_url: "http://127.0.0.1:${upstreamPort}/v1" }`,
        '      - { id: echo, type: cli, command: ["node", "examples/cli/echo-llm.mjs"] }',
        '    providers:',
        '      - { id: gpu-1, category: vllm, adapter: gpu, models: [m1], max_concurrency: 2 }',
        '      - { id: echo-1, category: cli, adapter: echo, models: [echo] }',
      ].join('\n'),
    );
    // The image's own command lines, with the mounted config and the ports of this test.
    const retarget = (argv: string[], port: number) =>
      argv.map((a) => (a === '/etc/iop-edge/edge.yaml' ? config : a.replace(/^0\.0\.0\.0:\d+$/, `127.0.0.1:${port}`)));
    const env = { ...process.env, ...image.env, REDIS_URL: redis.url, LOG_LEVEL: 'warn' };
    const start = (argv: string[]) => {
      const child = spawn(image.entrypoint[0], [...image.entrypoint.slice(1), ...argv], {
        cwd: image.dir,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      children.push(child);
      let output = '';
      child.stdout!.on('data', (c: Buffer) => (output += c));
      child.stderr!.on('data', (c: Buffer) => (output += c));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      const listening = new Promise<void>((resolve, reject) => {
        const timer = setInterval(() => /listening on/.test(output) && (clearInterval(timer), resolve()), 20);
        void exited.then(
          (code) => (clearInterval(timer), reject(new Error(`${argv[0]} exited with ${code}:\n${output}`))),
        );
      });
      return { child, exited, listening, output: () => output };
    };

    const gatewayArgv = retarget(image.cmd, gatewayPort);
    expect(gatewayArgv).toEqual(['edge-gateway', '--config', config, '--listen', `127.0.0.1:${gatewayPort}`]);
    const gateway = start(gatewayArgv);
    const exporter = start(
      retarget(['status-exporter', '--config', '/etc/iop-edge/edge.yaml', '--listen', '0.0.0.0:9464'], exporterPort),
    );
    await Promise.all([gateway.listening, exporter.listening]);

    const url = `http://127.0.0.1:${gatewayPort}`;
    expect(await (await fetch(`${url}/readyz`)).json()).toEqual({
      ready: true,
      queue: { backend: 'redis', reachable: true },
    });
    const chat = async (model: string) => {
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'from the image' }] }),
      });
      return {
        status: res.status,
        resource: res.headers.get('x-iop-resource'),
        text: ((await res.json()) as { choices?: { message: { content: string } }[] }).choices?.[0]?.message.content,
      };
    };
    expect(await chat('m1')).toMatchObject({
      status: 200,
      resource: 'gpu-1',
      text: expect.stringContaining('echo: from the image'),
    });
    expect(await chat('echo')).toEqual({ status: 200, resource: 'echo-1', text: 'echo: from the image' });

    const exporterUrl = `http://127.0.0.1:${exporterPort}`;
    expect(await (await fetch(`${exporterUrl}/healthz`)).json()).toEqual({ status: 'ok' });
    expect(JSON.stringify(await (await fetch(`${exporterUrl}/status`)).json())).toContain('"gpu-1"');

    // tini hands SIGTERM to node (the wrapper execs it), which drains and exits 0.
    gateway.child.kill('SIGTERM');
    exporter.child.kill('SIGTERM');
    expect(await gateway.exited).toBe(0);
    expect(await exporter.exited).toBe(0);
    expect(gateway.output()).not.toMatch(/"level":50/);
  });
});
