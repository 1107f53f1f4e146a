import { estimateTokenWeight } from '@iop/dispatch';

/**
 * What the token fleets share (`budget-fleet.ts`, README "Token budgets"; `token-fleet.ts`, README
 * "Token-aware provider limits"): a fleet file of one vLLM provider, the chat body the fake upstream
 * times and tags, the gateway's estimate of it, and one request sent and read to the end.
 */

/** The one pool provider of {@link oneProviderYaml}: pool model `model`, upstream model `upstream`. */
export interface FleetProvider {
  id: string;
  model: string;
  upstream: string;
  maxConcurrency: number;
  /** More provider settings, as flow-style YAML members (`max_tokens_in_flight: 8000`). */
  extra?: string;
}

/**
 * A fleet file (upstream `${UPSTREAM}`, queue prefix `${PREFIX}`, `max_wait_ms` 30000, `max_queued`
 * 500, `request_timeout_ms` 60000, health probes a minute apart) with one vLLM adapter `v` and its
 * one `provider`; `clients` are `gateway.clients` entries (flow-style YAML), `cluster` sets
 * `queue.cluster`.
 */
export function oneProviderYaml(opts: {
  provider: FleetProvider;
  clients?: readonly string[];
  cluster?: boolean;
}): string {
  const { id, model, upstream, maxConcurrency, extra } = opts.provider;
  const clients = opts.clients?.length ? `\n  clients:\n${opts.clients.map((c) => `    - ${c}`).join('\n')}` : '';
  return `
version: 1
gateway:
  request_timeout_ms: 60000${clients}
queue: { prefix: "\${PREFIX}", max_wait_ms: 30000, max_queued: 500, cluster: ${opts.cluster ?? false} }
health: { interval_ms: 60000 }
nodes:
  - id: n
    adapters:
      - { id: v, type: vllm, base_url: "\${UPSTREAM}" }
    providers:
      - { id: ${id}, category: vllm, adapter: v, models: [{ name: ${model}, upstream: ${upstream} }], max_concurrency: ${maxConcurrency}${
        extra ? `, ${extra}` : ''
      } }
`;
}

/**
 * One chat request to a fleet: its pool `model`, the `text` of its one message, `max_tokens`, whether
 * it streams, and the fake upstream's knobs: `tag` (the journal's marker), `delayMs` before the first
 * byte, then `chunks` content chunks `gapMs` apart.
 */
export interface FleetChat {
  model: string;
  text: string;
  maxTokens: number;
  stream: boolean;
  tag: number;
  delayMs: number;
  chunks: number;
  gapMs: number;
}

/** The body of {@link FleetChat}. */
export function fleetChatBody(chat: FleetChat): Record<string, unknown> {
  return {
    model: chat.model,
    stream: chat.stream,
    max_tokens: chat.maxTokens,
    messages: [{ role: 'user', content: chat.text }],
    fake: { tag: chat.tag, delay_ms: chat.delayMs, chunks: chat.chunks, chunk_gap_ms: chat.gapMs },
  };
}

/** The gateway's own estimate of a chat `body` (`estimateTokenWeight`, `@iop/dispatch`), in tokens. */
export function estimatedTokens(body: Record<string, unknown>): { prompt: number; completion: number; total: number } {
  const w = estimateTokenWeight('chat', body);
  const completion = w.completion ?? 0;
  return { prompt: w.prompt, completion, total: w.prompt + completion };
}

/** One answer as {@link postChat} read it: status 0 when the connection failed. */
export interface FleetAnswer {
  status: number;
  /** The error's `code` and `type`, for an error answer. */
  code?: string;
  type?: string;
  /** The whole body as text ('' when the connection failed). */
  text: string;
  /** The answer's headers (none when the connection failed). */
  headers: Headers;
}

/**
 * POSTs a chat `body` to the gateway at `url` (with the API key `key`, when given) and reads its answer
 * to the end. Never rejects: a connection that fails (a replica killed under it, an abort) is status 0.
 */
export async function postChat(
  url: string,
  body: Record<string, unknown>,
  opts: { key?: string; signal?: AbortSignal } = {},
): Promise<FleetAnswer> {
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(opts.key ? { authorization: `Bearer ${opts.key}` } : {}) },
      body: JSON.stringify(body),
      signal: opts.signal,
    });
    const text = await res.text();
    if (res.status === 200) return { status: 200, text, headers: res.headers };
    const error = (JSON.parse(text) as { error?: { code?: string; type?: string } }).error;
    return { status: res.status, code: error?.code, type: error?.type, text, headers: res.headers };
  } catch {
    return { status: 0, text: '', headers: new Headers() };
  }
}
