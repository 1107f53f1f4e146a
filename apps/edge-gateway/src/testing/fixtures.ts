import path from 'node:path';

/** Absolute path of the CLI model shipped in the repo (`examples/cli/echo-llm.mjs`). */
export const ECHO_LLM = path.resolve(__dirname, '../../../../examples/cli/echo-llm.mjs');

/**
 * A config with every kind of route, for tests: a pool `llama` of two providers (vllm `pool-a`,
 * openai_compat `pool-b`) on the upstream `${UPSTREAM}`, a pool `small` on one provider
 * (`solo`, max_concurrency 1), an Ollama provider `olla`, a CLI provider `echo`, and a legacy
 * `routes[]` entry `legacy` on a node without a catalog.
 */
export function fleetYaml(opts: { maxWaitMs?: number; maxQueued?: number; apiKeys?: string[]; maxBodyBytes?: number; requestTimeoutMs?: number } = {}): string {
  return `
version: 1
gateway:
  api_keys: ${JSON.stringify(opts.apiKeys ?? [])}
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
