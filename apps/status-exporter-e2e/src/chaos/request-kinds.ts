/** One kind of client request: its share of the load (`weight`), its path, whether it streams, its body. */
export interface Kind {
  name: string;
  weight: number;
  path: '/v1/chat/completions' | '/v1/responses' | '/v1/embeddings';
  stream: boolean;
  body(random: () => number): Record<string, unknown>;
}

/** The messages of every chat request of the run. */
export const chatMessages = [{ role: 'user', content: 'chaos' }];
/** The mix of the load: chat and Responses, streamed or not, pooled (`pool`, `one`) and CLI (`echo`). */
/**
 * A CPU-heavy client: bodies just under `gateway.max_body_values` (README "Security"). Embeddings of
 * token ids (58 inputs of 8192 ids, the most OpenAI allows per input) are the costliest body the
 * gateway accepts; a chat body of as many values that are not messages is refused at its first
 * element, after the parse. Each costs the replica tens of ms, never more.
 */
const HEAVY_VALUES = 58 * 8192;
const heavyTokens = Array.from({ length: HEAVY_VALUES }, (_, i) => i % 50_000);
const heavyInputs = Array.from({ length: 58 }, (_, i) => heavyTokens.slice(i * 8192, (i + 1) * 8192));

const KINDS: Kind[] = [
  {
    name: 'chat',
    weight: 28,
    path: '/v1/chat/completions',
    stream: false,
    body: (r) => ({ model: 'pool', messages: chatMessages, fake: { delay_ms: Math.floor(r() * 80) } }),
  },
  {
    name: 'chat stream',
    weight: 24,
    path: '/v1/chat/completions',
    stream: true,
    body: (r) => ({
      model: 'pool',
      stream: true,
      messages: chatMessages,
      fake: { chunks: 3 + Math.floor(r() * 6), chunk_gap_ms: 5 + Math.floor(r() * 25) },
    }),
  },
  {
    name: 'responses',
    weight: 10,
    path: '/v1/responses',
    stream: false,
    body: (r) => ({ model: 'pool', input: 'chaos', fake: { delay_ms: Math.floor(r() * 60) } }),
  },
  {
    name: 'responses stream',
    weight: 10,
    path: '/v1/responses',
    stream: true,
    body: (r) => ({
      model: 'pool',
      input: 'chaos',
      stream: true,
      fake: { chunks: 3 + Math.floor(r() * 5), chunk_gap_ms: 10 },
    }),
  },
  {
    name: 'one (max 1)',
    weight: 12,
    path: '/v1/chat/completions',
    stream: false,
    body: (r) => ({ model: 'one', messages: chatMessages, fake: { delay_ms: Math.floor(r() * 40) } }),
  },
  {
    name: 'one stream',
    weight: 8,
    path: '/v1/chat/completions',
    stream: true,
    body: () => ({ model: 'one', stream: true, messages: chatMessages, fake: { chunks: 4, chunk_gap_ms: 10 } }),
  },
  {
    name: 'cli',
    weight: 4,
    path: '/v1/chat/completions',
    stream: false,
    body: () => ({ model: 'echo', messages: chatMessages }),
  },
  {
    name: 'heavy embeddings (token ids)',
    weight: 1,
    path: '/v1/embeddings',
    stream: false,
    body: () => ({ model: 'pool', input: heavyInputs }),
  },
  {
    name: 'heavy chat (refused)',
    weight: 1,
    path: '/v1/chat/completions',
    stream: false,
    body: () => ({ model: 'pool', messages: heavyTokens }),
  },
  {
    name: 'cli stream',
    weight: 4,
    path: '/v1/chat/completions',
    stream: true,
    body: () => ({ model: 'echo', stream: true, messages: chatMessages }),
  },
];
const TOTAL_WEIGHT = KINDS.reduce((n, k) => n + k.weight, 0);
/** Share of requests the client drops at a random point (queued, before the first byte, mid-stream). */
export const DROP_SHARE = 0.15;

/** A kind drawn by weight. */
export function pickKind(random: () => number): Kind {
  let x = random() * TOTAL_WEIGHT;
  for (const kind of KINDS) if ((x -= kind.weight) < 0) return kind;
  return KINDS[0];
}
