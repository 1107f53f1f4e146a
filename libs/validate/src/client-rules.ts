import { createHash } from 'node:crypto';
import { lowerTo, raiseTo } from './bound-fix';
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
 * - a client key is no status key (`status.api_keys`): one key would open both the completions API
 *   and the status pages, which README "Security" guards apart;
 * - `max_in_flight` and `max_queued` can bind somewhere: a cap above the largest total of every pool
 *   (the sum of its providers' `max_concurrency`, or of their `max_queued`) never limits anything.
 *   Not `max_queued` of a client with `max_in_flight`: its parked requests wait in no provider's
 *   queue, so only its `max_queued` bounds them, whatever the providers' (README "Clients, priority
 *   and fair share");
 * - `tokens_per_day` is not below `tokens_per_minute` (README "Token budgets"): every minute lies in
 *   a day, so a larger per-minute budget would never limit anything.
 */
export function checkClients(config: EdgeConfig): SemanticProblem[] {
  return [
    ...uniqueClientIds(config),
    ...uniqueKeys(config),
    ...statusKeysApart(config),
    ...reachableCaps(config),
    ...orderedBudgets(config),
  ];
}

/** A key's SHA-256 digest, hex: keys are compared by digest so no map of the checker holds one. */
const keyDigest = (key: string) => createHash('sha256').update(key).digest('hex');

/** Every client key of the file with its path: `gateway.clients[i].keys[k]`, then `gateway.api_keys[k]`. */
function clientKeyPaths(config: EdgeConfig): { key: string; path: string }[] {
  return [
    ...config.gateway.clients.flatMap((c, i) =>
      c.keys.map((key, k) => ({ key, path: `gateway.clients[${i}].keys[${k}]` })),
    ),
    ...config.gateway.api_keys.map((key, k) => ({ key, path: `gateway.api_keys[${k}]` })),
  ];
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
  const seen = new Map<string, string>();
  const problems: SemanticProblem[] = [];
  for (const { key, path } of clientKeyPaths(config)) {
    const d = keyDigest(key);
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

/**
 * A key of `status.api_keys` that is also a client key (README "Security": the status pages and the
 * completions API are guarded by keys of their own), reported at the status key, never printing it.
 */
function statusKeysApart(config: EdgeConfig): SemanticProblem[] {
  const clientPaths = new Map<string, string>();
  for (const { key, path } of clientKeyPaths(config)) {
    const d = keyDigest(key);
    if (!clientPaths.has(d)) clientPaths.set(d, path);
  }
  return config.status.api_keys.flatMap((key, k): SemanticProblem[] => {
    const client = clientPaths.get(keyDigest(key));
    if (client === undefined) return [];
    return [
      {
        path: `status.api_keys[${k}]`,
        message: `this key is the same as ${client}: one key would open both the completions API and the status pages`,
        fix: 'give the status pages keys of their own, different from every client key; remove the repeated key from one of the two places.',
      },
    ];
  });
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
  // `least`: the smallest value the schema accepts for the cap (client-schema.ts).
  const caps = [
    { key: 'max_in_flight', of: 'concurrency', total: 'max_concurrency', least: 1 },
    { key: 'max_queued', of: 'queued', total: 'max_queued', least: 0 },
  ] as const;
  return config.gateway.clients.flatMap((client, i) =>
    caps.flatMap(({ key, of, total, least }): SemanticProblem[] => {
      const cap = client[key];
      const top = largest(of);
      if (cap === undefined || cap <= top[of]) return [];
      // Parked requests (at max_in_flight) count in max_queued and in no provider's queue.
      if (key === 'max_queued' && client.max_in_flight !== undefined) return [];
      return [
        {
          path: `gateway.clients[${i}].${key}`,
          message: `${key} ${cap} of client "${client.id}" is above the total ${total} of every pool (the largest, ${top.pool}, has ${top[of]}), so it never limits anything`,
          fix: `${lowerTo(key, top[of], least)}, or remove it.`,
        },
      ];
    }),
  );
}

/**
 * A client's `tokens_per_day` below its `tokens_per_minute` (README "Token budgets"): any minute's
 * charges count in the day that holds it, so the day's budget would refuse first and the minute's
 * would never limit anything. Equal budgets are accepted (a day that may be spent in one minute).
 */
function orderedBudgets(config: EdgeConfig): SemanticProblem[] {
  return config.gateway.clients.flatMap((client, i): SemanticProblem[] => {
    const { tokens_per_minute: minute, tokens_per_day: day } = client;
    if (minute === undefined || day === undefined || day >= minute) return [];
    return [
      {
        path: `gateway.clients[${i}].tokens_per_day`,
        message: `tokens_per_day ${day} of client "${client.id}" is below its tokens_per_minute ${minute}: every minute lies in a day, so tokens_per_minute would never limit anything`,
        fix: `${raiseTo('tokens_per_day', minute, Number.MAX_SAFE_INTEGER)}, or ${lowerTo('tokens_per_minute', day, 1)}, or remove tokens_per_minute.`,
      },
    ];
  });
}
