import path from 'node:path';

/** The pool providers of the chaos config: public model, upstream model, `max_concurrency`. */
export const PROVIDERS = [
  { id: 'p2', model: 'pool', upstream: 'up-2', limit: 2 },
  { id: 'p3', model: 'pool', upstream: 'up-3', limit: 3 },
  { id: 'solo', model: 'one', upstream: 'up-1', limit: 1 },
];

/** The CLI model shipped in the repository (`examples/cli/echo-llm.mjs`). */
const ECHO_LLM = path.resolve(__dirname, '../../../../examples/cli/echo-llm.mjs');

/** The config of every process of the run; `${PREFIX}` and `${UPSTREAM}` come from the environment. */
export const chaosYaml = () => `
version: 1
gateway: { request_timeout_ms: 20000 }
queue: { prefix: "\${PREFIX}", max_wait_ms: 15000, max_queued: 200 }
health: { interval_ms: 60000, unhealthy_after: 1000 }
nodes:
  - id: n
    adapters:
      - { id: up, type: openai_compat, base_url: "\${UPSTREAM}" }
      - { id: echo, type: cli, command: ["node", ${JSON.stringify(ECHO_LLM)}], env: { ECHO_LLM_CHUNK_MS: "5" } }
    providers:
${PROVIDERS.map((p) => `      - { id: ${p.id}, category: openai_compat, adapter: up, models: [{ name: ${p.model}, upstream: ${p.upstream} }], max_concurrency: ${p.limit} }`).join('\n')}
      - { id: echo-cli, category: cli, adapter: echo, models: [echo] }
`;
