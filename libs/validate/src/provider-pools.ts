import { isPoolCategory, modelNames, type EdgeConfig } from './schema';

/**
 * The pool of every enabled pool-category provider (docs/architecture.md, "Clients, priority and fair
 * share", "Redis and Redis Cluster"): providers that serve a common model, directly or through a chain
 * of siblings, can be candidates of one request, so they form one pool. A pool is named
 * `pool.<smallest provider id of the pool>` (URI-encoded). Fair share, client caps and counts are kept
 * per pool; on a Redis Cluster the name is also the pool's hash tag. Pure.
 * @returns provider id → pool name, for every enabled pool provider of the file.
 */
export function providerPools(config: EdgeConfig): Map<string, string> {
  const parent = new Map<string, string>();
  const find = (id: string): string => {
    let root = id;
    for (let up = parent.get(root); up !== undefined && up !== root; up = parent.get(root)) root = up;
    parent.set(id, root);
    return root;
  };
  const union = (a: string, b: string) => {
    const [ra, rb] = [find(a), find(b)];
    if (ra !== rb) parent.set(ra < rb ? rb : ra, ra < rb ? ra : rb);
  };
  const firstByModel = new Map<string, string>();
  for (const node of config.nodes) {
    for (const provider of node.providers) {
      if (!provider.enabled || !isPoolCategory(provider.category)) continue;
      if (!parent.has(provider.id)) parent.set(provider.id, provider.id);
      for (const { name } of provider.models.map(modelNames)) {
        const first = firstByModel.get(name);
        if (first === undefined) firstByModel.set(name, provider.id);
        else union(first, provider.id);
      }
    }
  }
  return new Map([...parent.keys()].map((id) => [id, `pool.${encodeURIComponent(find(id))}`]));
}
