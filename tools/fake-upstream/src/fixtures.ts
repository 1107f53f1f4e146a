// Configs and names for the gateway's and the exporter's tests (unit and e2e), next to the fake
// upstream they point at. Test code only: apps never import this package.
import { randomBytes } from 'node:crypto';
import path from 'node:path';

/** Absolute path of the CLI model shipped in the repo (`examples/cli/echo-llm.mjs`). */
export const ECHO_LLM = path.resolve(__dirname, '../../../examples/cli/echo-llm.mjs');

/**
 * A config with every kind of route, for tests: a pool `llama` of two providers (vllm `pool-a`,
 * openai_compat `pool-b`) on the upstream `${UPSTREAM}`, a pool `small` on one provider
 * (`solo`, max_concurrency 1), an Ollama provider `olla`, a CLI provider `echo`, and a legacy
 * `routes[]` entry `legacy` on a node without a catalog.
 */
export function fleetYaml(
  opts: {
    maxWaitMs?: number;
    maxQueued?: number;
    apiKeys?: string[];
    /** `gateway.clients` entries, as in the file (`{ id, keys, priority, weight, max_in_flight, max_queued }`). */
    clients?: object[];
    maxBodyBytes?: number;
    requestTimeoutMs?: number;
  } = {},
): string {
  return `
version: 1
gateway:
  api_keys: ${JSON.stringify(opts.apiKeys ?? [])}
  clients: ${JSON.stringify(opts.clients ?? [])}
  max_body_bytes: ${opts.maxBodyBytes ?? 4194304}
  request_timeout_ms: ${opts.requestTimeoutMs ?? 10000}
queue:
  backend: memory
  max_wait_ms: ${opts.maxWaitMs ?? 10000}
  max_queued: ${opts.maxQueued ?? 100}
nodes:
  - id: gpu-a
    adapters:
      - { id: vllm-0, type: vllm, base_url: "\${UPSTREAM}", api_key: "\${UPSTREAM_KEY}" }
      - { id: compat-0, type: openai_compat, base_url: "\${UPSTREAM}" }
      - { id: ollama-0, type: ollama, base_url: "\${UPSTREAM}" }
      - { id: echo, type: cli, command: ["node", ${JSON.stringify(ECHO_LLM)}], timeout_ms: 10000 }
    providers:
      - { id: pool-a, category: vllm, adapter: vllm-0, models: [{ name: llama, upstream: meta/llama-up }], max_concurrency: 2 }
      - { id: pool-b, category: openai_compat, adapter: compat-0, models: [llama], max_concurrency: 1 }
      - { id: solo, category: openai_compat, adapter: compat-0, models: [small], max_concurrency: 1 }
      - { id: olla, category: ollama, adapter: ollama-0, models: [qwen], max_concurrency: 2 }
      - { id: echo-cli, category: cli, adapter: echo, models: [echo] }
  - id: laptop
    adapters:
      - { id: laptop-compat, type: openai_compat, base_url: "\${UPSTREAM}" }
routes:
  - { model: legacy, node: laptop, adapter: laptop-compat, upstream: legacy-up }
`;
}

/** A `queue.prefix` no other test uses, valid as a config id (no `:`): `t-<name>-<pid>-<random>`. */
export function configPrefix(name: string): string {
  return `t-${name.replace(/[^A-Za-z0-9_-]/g, '_')}-${process.pid}-${randomBytes(4).toString('hex')}`;
}

/**
 * A fleet for exporter tests: node `gpu-a` with a catalog (vllm `llama-a` max 3, openai_compat
 * `llama-b` max 2, cli `echo-cli`) and node `laptop` without one (a cli adapter behind a legacy route).
 * Both pool providers serve `llama`: `llama-a` on `upstream`, `llama-b` on `upstreamB` (default: `upstream`).
 * `clients`: `gateway.clients` entries, each with the key `k-<id>` and its settings (e.g. `priority: 10`);
 * `statusKeys`: `status.api_keys`.
 */
export function exporterYaml(opts: {
  prefix: string;
  redisUrl?: string;
  cluster?: boolean;
  upstream?: string;
  upstreamB?: string;
  pushUrl?: string;
  intervalMs?: number;
  clients?: readonly { id: string; settings?: string }[];
  statusKeys?: readonly string[];
}): string {
  const clients = (opts.clients ?? [])
    .map((c) => `    - { id: ${c.id}, keys: [k-${c.id}]${c.settings ? `, ${c.settings}` : ''} }\n`)
    .join('');
  return `
version: 1
${clients ? `gateway:\n  clients:\n${clients}` : ''}queue:
  prefix: ${opts.prefix}
${opts.redisUrl ? `  redis_url: ${opts.redisUrl}\n` : ''}${opts.cluster ? '  cluster: true\n' : ''}status:
  interval_ms: ${opts.intervalMs ?? 5000}
${opts.statusKeys ? `  api_keys: ${JSON.stringify(opts.statusKeys)}\n` : ''}${opts.pushUrl ? `  push_url: ${opts.pushUrl}\n` : ''}nodes:
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
