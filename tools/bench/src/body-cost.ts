/**
 * `node dist/tools/bench/body-cost.js [--gateway-main FILE] [--upstream-main FILE]`: what a request
 * body of many small JSON values costs the gateway (README "Security", `gateway.max_body_values`).
 *
 * Starts the fake upstream and a gateway (memory backend, one pool provider on the upstream) as
 * their own processes on loopback, then sends each body of {@link SHAPES}, gzip-compressed, one at a
 * time: the time to the answer, its status and error code. Then six of the most costly shape at once
 * while `/healthz` is asked every 20 ms: the longest `/healthz` wait is how long the event loop
 * stalled for everyone else. Prints a markdown table to stdout.
 */
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { request } from 'undici';
import { BENCH_MODEL, benchGatewayYaml } from './gateway-config';
import { ServiceSet } from './service-process';

/** One body shape of the attack pass: a path and the JSON text sent (gzip) to it. */
interface Shape {
  name: string;
  path: string;
  body: () => string;
}

const repeat = (item: string, n: number) => new Array<string>(n).fill(item).join(',');

/** The shapes measured: the four of the attack pass, and legitimate large bodies for comparison. */
const SHAPES: readonly Shape[] = [
  {
    name: 'chat, messages: 1.3M zeros',
    path: '/v1/chat/completions',
    body: () => `{"model":"${BENCH_MODEL}","messages":[${repeat('0', 1_300_000)}]}`,
  },
  {
    name: 'chat, messages: 1M {}',
    path: '/v1/chat/completions',
    body: () => `{"model":"${BENCH_MODEL}","messages":[${repeat('{}', 1_000_000)}]}`,
  },
  {
    name: 'chat, metadata: 300k keys',
    path: '/v1/chat/completions',
    body: () =>
      `{"model":"${BENCH_MODEL}","messages":[{"role":"user","content":"x"}],"metadata":{${Array.from({ length: 300_000 }, (_, i) => `"k${i}":0`).join(',')}}}`,
  },
  {
    name: 'chat, stop: 1.3M strings',
    path: '/v1/chat/completions',
    body: () =>
      `{"model":"${BENCH_MODEL}","messages":[{"role":"user","content":"x"}],"stop":[${repeat('""', 1_300_000)}]}`,
  },
  {
    name: 'responses, input: 1M {}',
    path: '/v1/responses',
    body: () => `{"model":"${BENCH_MODEL}","input":[${repeat('{}', 1_000_000)}]}`,
  },
  {
    name: 'chat, messages: 499,900 zeros (under the default bound)',
    path: '/v1/chat/completions',
    body: () => `{"model":"${BENCH_MODEL}","messages":[${repeat('0', 499_900)}]}`,
  },
  {
    name: 'chat, stop: 499,900 strings (under the bound, forwarded)',
    path: '/v1/chat/completions',
    body: () =>
      `{"model":"${BENCH_MODEL}","messages":[{"role":"user","content":"x"}],"stop":[${repeat('""', 499_900)}]}`,
  },
  {
    name: 'chat, metadata: 24,900 keys (under the bound, forwarded)',
    path: '/v1/chat/completions',
    body: () =>
      `{"model":"${BENCH_MODEL}","messages":[{"role":"user","content":"x"}],"metadata":{${Array.from({ length: 24_900 }, (_, i) => `"k${i}":0`).join(',')}}}`,
  },
  {
    name: 'embeddings, 36 × 8192 token ids (legit)',
    path: '/v1/embeddings',
    body: () => `{"model":"${BENCH_MODEL}","input":[${repeat(`[${repeat('1234', 8192)}]`, 36)}]}`,
  },
  {
    name: 'embeddings, 2048 × 200 token ids (legit)',
    path: '/v1/embeddings',
    body: () => `{"model":"${BENCH_MODEL}","input":[${repeat(`[${repeat('1234', 200)}]`, 2048)}]}`,
  },
  {
    name: 'embeddings, 450k one-letter inputs (refused: 2048 inputs)',
    path: '/v1/embeddings',
    body: () => `{"model":"${BENCH_MODEL}","input":[${repeat('"a"', 450_000)}]}`,
  },
  {
    name: 'chat, x: 245k {} (refused: values)',
    path: '/v1/chat/completions',
    body: () => `{"model":"${BENCH_MODEL}","messages":[{"role":"user","content":"x"}],"x":[${repeat('{}', 245_000)}]}`,
  },
  {
    name: 'chat, x: 55k {} (under the bound, forwarded)',
    path: '/v1/chat/completions',
    body: () => `{"model":"${BENCH_MODEL}","messages":[{"role":"user","content":"x"}],"x":[${repeat('{}', 55_000)}]}`,
  },
  {
    name: 'chat, 24,900 top-level keys (under the bound, forwarded)',
    path: '/v1/chat/completions',
    body: () =>
      `{"model":"${BENCH_MODEL}","messages":[{"role":"user","content":"x"}],${Array.from({ length: 24_900 }, (_, i) => `"k${i}":0`).join(',')}}`,
  },
  {
    name: 'chat, x: 630 arrays 98 deep (under the bound; 400 too deep)',
    path: '/v1/chat/completions',
    body: () =>
      `{"model":"${BENCH_MODEL}","messages":[{"role":"user","content":"x"}],"x":[${repeat(`${'['.repeat(98)}${']'.repeat(98)}`, 630)}]}`,
  },
  {
    name: 'embeddings, 2048 × 146 token ids (legit)',
    path: '/v1/embeddings',
    body: () => `{"model":"${BENCH_MODEL}","input":[${repeat(`[${repeat('1234', 146)}]`, 2048)}]}`,
  },
];

/** One answer: status, error code (when an error), time from the first byte sent to the last received, in ms. */
interface Measured {
  status: number;
  code: string;
  ms: number;
}

async function send(url: string, shape: Shape, gz: Buffer): Promise<Measured> {
  const startedAt = performance.now();
  const res = await request(`${url}${shape.path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    body: gz,
  });
  const text = await res.body.text();
  const ms = performance.now() - startedAt;
  let code = '';
  try {
    code = (JSON.parse(text) as { error?: { code?: string } }).error?.code ?? '';
  } catch {
    code = '';
  }
  return { status: res.statusCode, code, ms };
}

/** Asks `/healthz` every 20 ms until `stop` resolves; @returns the longest answer time, in ms. */
async function longestProbe(url: string, stop: Promise<unknown>): Promise<number> {
  let done = false;
  void stop.then(() => (done = true));
  let longest = 0;
  while (!done) {
    const startedAt = performance.now();
    const res = await request(`${url}/healthz`);
    await res.body.text();
    longest = Math.max(longest, performance.now() - startedAt);
    await new Promise((r) => setTimeout(r, 20));
  }
  return longest;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { 'gateway-main': { type: 'string' }, 'upstream-main': { type: 'string' } },
  });
  const root = process.cwd();
  const gatewayMain = path.resolve(values['gateway-main'] ?? 'dist/apps/edge-gateway/main.js');
  const upstreamMain = path.resolve(values['upstream-main'] ?? 'dist/tools/fake-upstream/main.js');
  for (const file of [gatewayMain, upstreamMain]) {
    if (!existsSync(file)) throw new Error(`${file} is missing: build edge-gateway and fake-upstream first`);
  }
  const services = new ServiceSet();
  try {
    const upstream = await services.start({
      name: 'fake-upstream',
      command: process.execPath,
      args: [upstreamMain, '--port', '0'],
      cwd: root,
      ready: /(http:\/\/127\.0\.0\.1:\d+)/,
    });
    const dir = mkdtempSync(path.join(os.tmpdir(), 'iop-body-cost-'));
    const config = path.join(dir, 'edge.yaml');
    writeFileSync(config, benchGatewayYaml({ upstreamUrl: `${upstream.announced}/v1`, backend: 'memory' }));
    const gateway = await services.start({
      name: 'gateway',
      command: process.execPath,
      args: [gatewayMain, 'serve', '--config', config, '--listen', '127.0.0.1:0'],
      env: { LOG_LEVEL: 'warn', REDIS_URL: '' },
      cwd: root,
      ready: /listening on (http:\/\/[^\s"]+)/,
    });
    const url = gateway.announced;
    const lines = ['| body (gzip) | sent | status | code | ms |', '|---|---|---|---|---|'];
    let worst: { shape: Shape; gz: Buffer; ms: number } | undefined;
    for (const shape of SHAPES) {
      const gz = gzipSync(shape.body());
      await send(url, shape, gz); // warm-up
      const m = await send(url, shape, gz);
      lines.push(
        `| ${shape.name} | ${(gz.length / 1024).toFixed(1)} KiB | ${m.status} | ${m.code} | ${m.ms.toFixed(0)} |`,
      );
      if (!worst || m.ms > worst.ms) worst = { shape, gz, ms: m.ms };
    }
    if (worst) {
      const { shape, gz } = worst;
      const six = Promise.all(Array.from({ length: 6 }, () => send(url, shape, gz)));
      const longest = await longestProbe(url, six);
      const answers = await six;
      lines.push(
        '',
        `six of "${shape.name}" at once: slowest answered in ${Math.max(...answers.map((a) => a.ms)).toFixed(0)} ms; ` +
          `longest /healthz meanwhile ${longest.toFixed(0)} ms; gateway peak RSS ${(gateway.memory().peakRss / 2 ** 20).toFixed(0)} MiB`,
      );
    }
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await services.stopAll();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`body-cost: ${(err as Error).stack ?? String(err)}\n`);
  process.exitCode = 1;
});
