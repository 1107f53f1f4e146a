import { createHash } from 'node:crypto';
import { usablePoolProvider } from './pool-provider';
import { providerPools } from './provider-pools';
import type { EdgeConfig } from './schema';
import type { SemanticProblem } from './semantic-rules';

/**
 * The rules of `gateway.clients` and `gateway.api_keys` that relate entries to each other and to the
 * pools (docs/architecture.md, "Clients, priority and fair share"), on a config that passed the
 * schema. Every problem names its path and a fix, never a key's value. Pure; never throws.
 * - client ids are unique;
 * - a key identifies one client: no key appears twice, across `clients[].keys` and `api_keys`;
 * - `max_in_flight` and `max_queued` can bind somewhere: a cap above the largest total of every pool
 *   (the sum of its providers' `max_concurrency`, or of their `max_queued`) never limits anything.
 */
export function checkClients(config: EdgeConfig): SemanticProblem[] {
  return [...uniqueClientIds(config), ...uniqueKeys(config), ...reachableCaps(config)];
}

function uniqueClientIds(config: EdgeConfig): SemanticProblem[] {
  const seen = new Map<string, number>();
  return config.gateway.clients.flatMap((client, i): SemanticProblem[] => {
    const first = seen.get(client.id);
    if (first === undefined) {
      seen.set(client.id, i);
      return [];
    }
    return [
      {
        path: `gateway.clients[${i}].id`,
        message: `client id "${client.id}" is already used by gateway.clients[${first}]`,
        fix: 'give every client a unique id; to give one client several keys, list them under its keys.',
      },
    ];
  });
}

function uniqueKeys(config: EdgeConfig): SemanticProblem[] {
  const paths = [
    ...config.gateway.clients.flatMap((c, i) =>
      c.keys.map((key, k) => ({ key, path: `gateway.clients[${i}].keys[${k}]` })),
    ),
    ...config.gateway.api_keys.map((key, k) => ({ key, path: `gateway.api_keys[${k}]` })),
  ];
  // Compared by digest so the key itself is held in no map of the checker.
  const seen = new Map<string, string>();
  const problems: SemanticProblem[] = [];
  for (const { key, path } of paths) {
    const d = createHash('sha256').update(key).digest('hex');
    const first = seen.get(d);
    if (first === undefined) seen.set(d, path);
    else
      problems.push({
        path,
        message: `this key is the same as ${first}: a key must identify exactly one client`,
        fix: 'give every client its own keys; remove the repeated key from one of the two places.',
      });
  }
  return problems;
}

/** Per pool: the sum of its usable providers' `max_concurrency` and of their `max_queued`. */
function poolTotals(config: EdgeConfig): { pool: string; concurrency: number; queued: number }[] {
  const pools = providerPools(config);
  const totals = new Map<string, { pool: string; concurrency: number; queued: number }>();
  for (const node of config.nodes) {
    for (const provider of node.providers) {
      const pool = pools.get(provider.id);
      const use = usablePoolProvider(node, provider, config.queue);
      if (pool === undefined || !use.usable) continue;
      const t = totals.get(pool) ?? { pool, concurrency: 0, queued: 0 };
      t.concurrency += use.maxConcurrency;
      t.queued += use.maxQueued;
      totals.set(pool, t);
    }
  }
  return [...totals.values()];
}

function reachableCaps(config: EdgeConfig): SemanticProblem[] {
  const totals = poolTotals(config);
  if (totals.length === 0) return [];
  const largest = (of: 'concurrency' | 'queued') => totals.reduce((a, b) => (b[of] > a[of] ? b : a));
  const caps = [
    { key: 'max_in_flight', of: 'concurrency', total: 'max_concurrency' },
    { key: 'max_queued', of: 'queued', total: 'max_queued' },
  ] as const;
  return config.gateway.clients.flatMap((client, i) =>
    caps.flatMap(({ key, of, total }): SemanticProblem[] => {
      const cap = client[key];
      const top = largest(of);
      if (cap === undefined || cap <= top[of]) return [];
      return [
        {
          path: `gateway.clients[${i}].${key}`,
          message: `${key} ${cap} of client "${client.id}" is above the total ${total} of every pool (the largest, ${top.pool}, has ${top[of]}), so it never limits anything`,
          fix: `lower ${key} to ${top[of]} or less, or remove it.`,
        },
      ];
    }),
  );
}
