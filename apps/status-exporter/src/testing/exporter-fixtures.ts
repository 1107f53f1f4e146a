import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** The built gateway (`nx run edge-gateway:build`; the exporter's `test` target depends on it). */
export const GATEWAY_MAIN = path.resolve(__dirname, '../../../../dist/apps/edge-gateway/main.js');

/** The built exporter (`nx run status-exporter:build`); the `test` target depends on `build`. */
export const EXPORTER_MAIN = path.resolve(__dirname, '../../../../dist/apps/status-exporter/main.js');

/** A `queue.prefix` no other test uses, valid as a config id (no `:`): `t-<name>-<pid>-<random>`. */
export function configPrefix(name: string): string {
  return `t-${name.replace(/[^A-Za-z0-9_-]/g, '_')}-${process.pid}-${randomBytes(4).toString('hex')}`;
}

/**
 * A fleet for exporter tests: node `gpu-a` with a catalog (vllm `llama-a` max 3, openai_compat
 * `llama-b` max 2, cli `echo-cli`) and node `laptop` without one (a cli adapter behind a legacy route).
 * Both pool providers serve `llama`: `llama-a` on `upstream`, `llama-b` on `upstreamB` (default: `upstream`).
 */
export function exporterYaml(opts: { prefix: string; redisUrl?: string; cluster?: boolean; upstream?: string; upstreamB?: string; pushUrl?: string; intervalMs?: number }): string {
  return `
version: 1
queue:
  prefix: ${opts.prefix}
${opts.redisUrl ? `  redis_url: ${opts.redisUrl}\n` : ''}${opts.cluster ? '  cluster: true\n' : ''}status:
  interval_ms: ${opts.intervalMs ?? 5000}
${opts.pushUrl ? `  push_url: ${opts.pushUrl}\n` : ''}nodes:
  - id: gpu-a
    adapters:
      - { id: vllm-0, type: vllm, base_url: "${opts.upstream ?? 'http://127.0.0.1:9/v1'}" }
      - { id: compat-0, type: openai_compat, base_url: "${opts.upstreamB ?? opts.upstream ?? 'http://127.0.0.1:9/v1'}" }
      - { id: echo, type: cli, command: ["node", "-e", "0"] }
    providers:
      - { id: llama-a, category: vllm, adapter: vllm-0, models: [llama], max_concurrency: 3 }
      - { id: llama-b, category: openai_compat, adapter: compat-0, models: [llama], max_concurrency: 2 }
      - { id: echo-cli, category: cli, adapter: echo, models: [echo] }
  - id: laptop
    adapters:
      - { id: codex-cli, type: cli, command: ["codex", "exec", "-"] }
routes:
  - { model: codex, node: laptop, adapter: codex-cli }
`;
}

/** Writes `yaml` to a fresh temp file and returns its path. */
export function writeTempConfig(yaml: string): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'iop-exporter-')), 'edge.yaml');
  writeFileSync(file, yaml);
  return file;
}

/** A Node service running as its own OS process (the built exporter or gateway). */
export interface ServiceProcess {
  /** The URL from its "listening on" line, or undefined when it exited first. */
  url?: string;
  child: ChildProcess;
  output(): string;
  /** Resolves to the exit code once the process exited. */
  exited: Promise<number | null>;
  /** SIGTERM and wait; resolves to the exit code. */
  stop(): Promise<number | null>;
}

/**
 * Runs `node <main> ...args` and waits for its "listening on URL" line, or for its exit (then
 * `url` is undefined: for tests of refusals).
 * @throws Error with the output when it neither listens nor exits within `timeoutMs`.
 */
export async function spawnService(main: string, args: string[], opts: { env?: Record<string, string>; timeoutMs?: number } = {}): Promise<ServiceProcess> {
  if (!existsSync(main)) throw new Error(`${main} is missing: build it first (npx nx run-many -t build)`);
  const child = spawn(process.execPath, [main, ...args], { env: { ...process.env, LOG_LEVEL: 'warn', ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = await new Promise<string | undefined>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${path.basename(path.dirname(main))} did not listen within ${opts.timeoutMs ?? 15000} ms:\n${output}`)), opts.timeoutMs ?? 15000);
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    void exited.then(() => {
      clearTimeout(timer);
      resolve(undefined);
    });
  });
  return {
    url,
    child,
    output: () => output,
    exited,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}
