import { resolveProviderAdapter } from './adapter-resolution';
import { lowerTo } from './bound-fix';
import { checkClients } from './client-rules';
import { modelPlacement } from './model-placement';
import type { EdgeConfig } from './schema';
import { isPoolCategory } from './schema';

/** A rule broken by a schema-valid config; the loader adds line and column. */
export interface SemanticProblem {
  /** e.g. `nodes[0].providers[1].adapter`; may name a key that is absent (then positioned at its parent). */
  path: string;
  message: string;
  fix: string;
}

/**
 * The rules of the file (docs/architecture.md, "Settings") that relate one part of the file to another, checked on a config that
 * already passed the schema. Returns every broken rule, in rule order. Pure; never throws.
 * - ids unique: node ids; adapter ids within a node; provider ids across the whole file;
 * - `provider.adapter` resolves on its node (missing, disabled-while-provider-enabled, ambiguous are errors)
 *   and `category` equals the resolved adapter's type: the adapter conditions of `usablePoolProvider`
 *   (docs/architecture.md, "Usable pool providers"), reported here every one, not just the first;
 * - pool categories need `max_concurrency` ≥ 1; cli providers are direct, so no `max_concurrency`/`max_queued`
 *   (nor `max_tokens_in_flight`/`default_completion_tokens`); `default_completion_tokens` needs
 *   `max_tokens_in_flight` (README "Token-aware provider limits");
 * - `routes[]` name an existing node and an adapter id on it;
 * - a model is pooled or direct, never both; one direct target per model; a `routes[]` model is not
 *   already served by a catalog provider; a provider lists a model once, a route is not written
 *   twice (`modelPlacement`). Disabled providers count: the rule is about the file;
 * - clients: unique ids, a key names one client and is no status key, caps a pool can reach,
 *   `tokens_per_day` not below `tokens_per_minute` (`checkClients`);
 * - `gateway.max_connections_per_address` is not above `gateway.max_connections` (README "Security":
 *   an address's share of the connections the process holds);
 * - with `queue.cluster: true`, `queue.prefix` holds no `{` or `}` (hash tags are the gateway's own).
 */
export function checkSemantics(config: EdgeConfig): SemanticProblem[] {
  return [
    ...uniqueIds(config),
    ...providerRules(config),
    ...routeTargets(config),
    ...modelPlacement(config),
    ...checkClients(config),
    ...connectionShare(config),
    ...clusterPrefix(config),
  ];
}

/**
 * `gateway.max_connections_per_address` above `gateway.max_connections` (README "Security", "Configuration"):
 * one address never holds more connections than the process, so such a share never limits anything.
 * Equal is the setting behind a load balancer or proxy (every connection from its address).
 */
function connectionShare(config: EdgeConfig): SemanticProblem[] {
  const { max_connections: max, max_connections_per_address: share } = config.gateway;
  if (share === undefined || share <= max) return [];
  return [
    {
      path: 'gateway.max_connections_per_address',
      message: `max_connections_per_address ${share} is above max_connections ${max}: one address never holds more connections than the process, so it never limits anything`,
      fix: `${lowerTo('max_connections_per_address', max, 1)}, or remove it for half of max_connections.`,
    },
  ];
}

/**
 * With `queue.cluster: true` the gateway puts its own hash tag on the keys of every pool (and
 * `{health}`, `{replicas}`; docs/architecture.md, "Redis and Redis Cluster"), so `queue.prefix` holds
 * no `{` or `}`: a tag there would take the place of the gateway's (every pool on one slot) and an
 * empty or unbalanced one (`iop{}`) splits a pool's keys over slots, so every pooled request fails.
 */
function clusterPrefix(config: EdgeConfig): SemanticProblem[] {
  const { prefix, cluster } = config.queue;
  if (!cluster || !/[{}]/.test(prefix)) return [];
  const plain = prefix.replace(/[{}]/g, '') || 'iop-edge';
  return [
    {
      path: 'queue.prefix',
      message: `queue.prefix "${prefix}" holds "{" or "}", but with queue.cluster: true the hash tags of the keys are the gateway's own (one per pool, so the pools spread over the shards)`,
      fix: `remove the braces, e.g. prefix: ${plain}.`,
    },
  ];
}

function uniqueIds(config: EdgeConfig): SemanticProblem[] {
  const problems: SemanticProblem[] = [];
  const claim = (seen: Map<string, string>, id: string, path: string, what: string, fix: string) => {
    const first = seen.get(id);
    if (first === undefined) seen.set(id, path);
    else problems.push({ path: `${path}.id`, message: `${what} id "${id}" is already used by ${first}`, fix });
  };
  const nodeIds = new Map<string, string>();
  const providerIds = new Map<string, string>();
  config.nodes.forEach((node, n) => {
    claim(nodeIds, node.id, `nodes[${n}]`, 'node', 'give every node a unique id.');
    const adapterIds = new Map<string, string>();
    node.adapters.forEach((a, i) =>
      claim(
        adapterIds,
        a.id,
        `nodes[${n}].adapters[${i}]`,
        'adapter',
        `give every adapter on node "${node.id}" a unique id.`,
      ),
    );
    node.providers.forEach((p, i) =>
      claim(
        providerIds,
        p.id,
        `nodes[${n}].providers[${i}]`,
        'provider',
        'give every provider a unique id across the whole file.',
      ),
    );
  });
  return problems;
}

function providerRules(config: EdgeConfig): SemanticProblem[] {
  const problems: SemanticProblem[] = [];
  config.nodes.forEach((node, n) =>
    node.providers.forEach((provider, i) => {
      const at = `nodes[${n}].providers[${i}]`;
      const add = (key: string, message: string, fix: string) => problems.push({ path: `${at}.${key}`, message, fix });
      const resolution = resolveProviderAdapter(node, provider);
      if (resolution.kind === 'missing') {
        add(
          'adapter',
          `adapter "${provider.adapter}" is not defined on node "${node.id}"`,
          node.adapters.length > 0
            ? `use one of: ${oneOf(node.adapters.map((a) => a.id))}.`
            : `declare an adapter under nodes[${n}].adapters, then name its id here.`,
        );
      } else if (resolution.kind === 'ambiguous') {
        add(
          'adapter',
          `adapter "${provider.adapter}" is a type with ${resolution.candidates.length} enabled adapters on node "${node.id}" (${resolution.candidates.join(', ')})`,
          `name one adapter id instead: ${resolution.candidates.join(' or ')}.`,
        );
      } else if (resolution.kind === 'disabled' && provider.enabled) {
        const which =
          resolution.adapter.id === provider.adapter
            ? `adapter "${provider.adapter}"`
            : `every adapter of type "${provider.adapter}"`;
        add(
          'adapter',
          `${which} on node "${node.id}" is disabled, but provider "${provider.id}" is enabled`,
          'enable the adapter, point the provider at an enabled adapter, or set enabled: false on the provider.',
        );
      }
      if (resolution.kind === 'ok' || resolution.kind === 'disabled') {
        const { id, type } = resolution.adapter;
        if (type !== provider.category) {
          add(
            'category',
            `category "${provider.category}" does not match the type "${type}" of adapter "${id}"`,
            `set category: ${type}, or point adapter at ${article(provider.category)} ${provider.category} adapter on node "${node.id}".`,
          );
        }
      }
      if (isPoolCategory(provider.category)) {
        if (provider.max_concurrency === undefined) {
          add(
            'max_concurrency',
            `provider "${provider.id}" of pool category "${provider.category}" has no max_concurrency`,
            'add max_concurrency: N (N ≥ 1), the most requests it serves at once.',
          );
        } else if (provider.max_concurrency < 1) {
          add(
            'max_concurrency',
            `max_concurrency of pool provider "${provider.id}" is ${provider.max_concurrency}, below 1`,
            'set max_concurrency to 1 or more.',
          );
        }
        if (provider.default_completion_tokens !== undefined && provider.max_tokens_in_flight === undefined) {
          add(
            'default_completion_tokens',
            `default_completion_tokens of provider "${provider.id}" has no effect: it has no max_tokens_in_flight`,
            'add max_tokens_in_flight: N (the most tokens it holds at once), or remove default_completion_tokens.',
          );
        }
      } else {
        for (const key of [
          'max_concurrency',
          'max_queued',
          'max_tokens_in_flight',
          'default_completion_tokens',
        ] as const) {
          if (provider[key] !== undefined) {
            add(
              key,
              `${key} is not allowed on cli provider "${provider.id}": a cli provider is a direct route, never queued`,
              `remove ${key}; set max_concurrency and max_waiting on the cli adapter instead (they bound its runs for every provider and route that uses it).`,
            );
          }
        }
      }
    }),
  );
  return problems;
}

function routeTargets(config: EdgeConfig): SemanticProblem[] {
  return config.routes.flatMap((route, r): SemanticProblem[] => {
    const node = config.nodes.find((candidate) => candidate.id === route.node);
    if (!node) {
      return [
        {
          path: `routes[${r}].node`,
          message: `node "${route.node}" is not defined`,
          fix: `use one of: ${oneOf(config.nodes.map((x) => x.id))}.`,
        },
      ];
    }
    if (node.adapters.some((a) => a.id === route.adapter)) return [];
    return [
      {
        path: `routes[${r}].adapter`,
        message: `adapter "${route.adapter}" is not defined on node "${node.id}"`,
        fix:
          node.adapters.length > 0
            ? `use one of: ${oneOf(node.adapters.map((a) => a.id))}.`
            : `declare the adapter under node "${node.id}" first.`,
      },
    ];
  });
}

/** The distinct ids of a list, in order, comma-separated (a duplicate id is reported once). */
function oneOf(ids: readonly string[]): string {
  return [...new Set(ids)].join(', ');
}

/** "an" before a vowel sound (an ollama / an openai_compat), else "a". */
function article(word: string): string {
  return /^[aeio]/.test(word) ? 'an' : 'a';
}
