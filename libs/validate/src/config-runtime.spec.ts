import { mkdtempSync, writeFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConfigRuntime, type RuntimeLogger } from './config-runtime';
import { loadConfigFile } from './load-config';

const yaml = (maxConcurrency: number | string) => `version: 1
nodes:
  - id: n
    adapters: [{ id: a, type: vllm, base_url: "http://127.0.0.1:1/v1" }]
    providers: [{ id: p, category: vllm, adapter: a, models: [m], max_concurrency: ${maxConcurrency} }]
`;

function setup(text = yaml(1)) {
  const dir = mkdtempSync(path.join(tmpdir(), 'iop-runtime-'));
  const file = path.join(dir, 'edge.yaml');
  writeFileSync(file, text);
  const first = loadConfigFile(file, {});
  if (!first.ok) throw new Error('fixture invalid');
  const logs: string[] = [];
  const logger: RuntimeLogger = {
    info: (_o, m) => logs.push(m),
    warn: (_o, m) => logs.push(m),
    error: (_o, m) => logs.push(m),
  };
  const applied: number[] = [];
  const rejected: number[] = [];
  const runtime = new ConfigRuntime(
    file,
    { config: first.config, hash: first.hash, loadedAt: new Date() },
    {
      env: {},
      logger,
      apply: async (next) => {
        applied.push(next.config.nodes[0].providers[0].max_concurrency!);
      },
      onRejected: (problems) => rejected.push(problems.length),
    },
  );
  return { dir, file, runtime, logs, applied, rejected };
}

describe('ConfigRuntime (runtime config refresh)', () => {
  it('swaps in a valid changed file after applying it, and skips an unchanged one', async () => {
    const { file, runtime, applied } = setup();
    const before = runtime.current;
    expect(await runtime.reload('test')).toEqual({ outcome: 'unchanged' });
    writeFileSync(file, yaml(4));
    expect(await runtime.reload('test')).toEqual({ outcome: 'applied' });
    expect(applied).toEqual([4]);
    expect(runtime.current.config.nodes[0].providers[0].max_concurrency).toBe(4);
    expect(runtime.current.hash).not.toBe(before.hash);
  });

  it('rejects an invalid file with the validate problems, counts it, and keeps the running config', async () => {
    const { file, runtime, logs, rejected } = setup();
    const before = runtime.current;
    writeFileSync(file, yaml('"four"'));
    const result = await runtime.reload('test');
    expect(result.outcome).toBe('rejected');
    expect(rejected).toEqual([1]);
    expect(runtime.current).toBe(before);
    expect(logs.join('\n')).toMatch(/edge\.yaml:5:\d+ nodes\[0\]\.providers\[0\]\.max_concurrency/);
  });

  it('keeps the running config when applying the new one fails', async () => {
    const { file, runtime } = setup();
    const failing = new ConfigRuntime(file, runtime.current, {
      env: {},
      logger: { info: () => undefined, warn: () => undefined, error: () => undefined },
      apply: async () => {
        throw new Error('redis down');
      },
    });
    writeFileSync(file, yaml(2));
    const result = await failing.reload('test');
    expect(result.outcome).toBe('rejected');
    expect(failing.current).toBe(runtime.current);
  });

  it('reloads by itself when the file is replaced (rename, as config maps do)', async () => {
    const { dir, file, runtime, applied } = setup();
    runtime.watch(20);
    try {
      const tmp = path.join(dir, 'edge.yaml.tmp');
      writeFileSync(tmp, yaml(7));
      renameSync(tmp, file);
      const deadline = Date.now() + 3000;
      while (applied.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(applied).toEqual([7]);
    } finally {
      runtime.close();
    }
  });
});
