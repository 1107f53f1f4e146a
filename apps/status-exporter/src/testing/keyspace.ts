import type { RedisClient } from '@iop/dispatch';
import { Cluster, type Redis } from 'ioredis';

/** The masters that hold the keys: every master of a cluster, or the one server. */
const masters = (client: RedisClient): Redis[] => (client instanceof Cluster ? client.nodes('master') : [client]);

/** Every key matching `match` on every master (SCAN, so a large keyspace is read in steps). */
async function keysOf(node: Redis, match: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await node.scan(cursor, 'MATCH', match, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return keys;
}

/**
 * The whole keyspace as it is now: every key of every master with its value as `DUMP` serializes
 * it (type, encoding and contents, hex) and whether it has a TTL, sorted by key. Two calls give
 * equal maps exactly when no key was created, deleted or changed in between.
 */
export async function keyspace(client: RedisClient): Promise<Map<string, string>> {
  const entries: [string, string][] = [];
  for (const node of masters(client)) {
    for (const key of await keysOf(node, '*')) {
      const [dump, pttl] = await Promise.all([node.dumpBuffer(key), node.pttl(key)]);
      if (dump) entries.push([key, `${dump.toString('hex')}|${pttl >= 0 ? 'ttl' : 'persistent'}`]);
    }
  }
  return new Map(entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/**
 * Copies every key under `<from>:` to the same name under `<to>:`, without expiry, and resolves
 * how many: a frozen copy of what gateways left in Redis, which no gateway renews or sweeps. The
 * hash tag follows the prefix, so a copied key stays on its slot of a cluster.
 */
export async function frozenCopy(client: RedisClient, from: string, to: string): Promise<number> {
  let copied = 0;
  for (const node of masters(client)) {
    for (const key of await keysOf(node, `${from}:*`)) {
      const dump = await node.dumpBuffer(key);
      if (!dump) continue;
      await client.restore(`${to}${key.slice(from.length)}`, 0, dump, 'REPLACE');
      copied++;
    }
  }
  return copied;
}

/** The keys whose value differs between two {@link keyspace} reads, created and deleted ones included. */
export function changedKeys(before: ReadonlyMap<string, string>, after: ReadonlyMap<string, string>): string[] {
  const keys = new Set([...before.keys(), ...after.keys()]);
  return [...keys].filter((k) => before.get(k) !== after.get(k)).sort();
}
