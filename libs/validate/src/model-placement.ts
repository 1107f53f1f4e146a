import type { EdgeConfig } from './schema';
import { isPoolCategory, modelNames } from './schema';
import type { SemanticProblem } from './semantic-rules';

/** One place a model name is served from: a catalog provider's model entry or a `routes[]` entry. */
interface Placement {
  model: string;
  path: string;
  /** Who serves it, for messages: `pool provider "x"`, `cli provider "y"`, `route to laptop/codex-cli`. */
  label: string;
  /** Same target ⇔ same identity. */
  target: string;
  pooled: boolean;
  catalog: boolean;
}

/**
 * Where each model is served (README "Pooled and direct routes"; docs/architecture.md, "Settings"),
 * checked across the file. Returns every broken rule, in this order; pure, never throws:
 * - a provider lists a model name once: `[m, {name: m, upstream: other}]` would leave one of the two
 *   entries unused (path of the later entry);
 * - a `routes[]` model is not already served by a catalog provider;
 * - a model is pooled or direct, never both;
 * - one direct target per model, and one `routes[]` entry per model and target (a second would be
 *   ignored).
 * Public names are compared, never upstream names. Disabled providers count: the rules are about
 * the file.
 */
export function modelPlacement(config: EdgeConfig): SemanticProblem[] {
  const catalog: Placement[] = config.nodes.flatMap((node, n) =>
    node.providers.flatMap((provider, i) =>
      provider.models.map((entry, m) => ({
        model: modelNames(entry).name,
        path: `nodes[${n}].providers[${i}].models[${m}]`,
        label: `${isPoolCategory(provider.category) ? 'pool' : 'cli'} provider "${provider.id}"`,
        target: `provider:${n}:${i}`,
        pooled: isPoolCategory(provider.category),
        catalog: true,
      })),
    ),
  );
  const routes: Placement[] = config.routes.map((route, r) => ({
    model: route.model,
    path: `routes[${r}].model`,
    label: `route to ${route.node}/${route.adapter}`,
    target: `route:${route.node}/${route.adapter}`,
    pooled: false,
    catalog: false,
  }));
  const problems: SemanticProblem[] = [...modelsListedTwice(config)];
  const clashes = new Set<Placement>();
  for (const route of routes) {
    const served = catalog.filter((c) => c.model === route.model);
    if (served.length === 0) continue;
    clashes.add(route);
    problems.push({
      path: route.path,
      message: `model "${route.model}" is already served by catalog ${served.map((s) => `${s.label} (${s.path})`).join(', ')}`,
      fix: 'remove this route; routes[] is only for nodes without a catalog entry for the model.',
    });
  }
  for (const direct of catalog.filter((c) => !c.pooled)) {
    const pools = catalog.filter((c) => c.pooled && c.model === direct.model);
    if (pools.length === 0) continue;
    clashes.add(direct);
    problems.push({
      path: direct.path,
      message: `model "${direct.model}" is pooled by ${pools.map((p) => p.label).join(', ')} and also served directly by ${direct.label}`,
      fix: 'serve a model either through pool providers or through one direct target, never both; remove it from one side or rename it.',
    });
  }
  const firstDirect = new Map<string, Placement>();
  for (const direct of [...catalog, ...routes].filter((p) => !p.pooled && !clashes.has(p))) {
    const first = firstDirect.get(direct.model);
    if (!first) firstDirect.set(direct.model, direct);
    else if (first.target !== direct.target) {
      problems.push({
        path: direct.path,
        message: `model "${direct.model}" already has a direct target, ${first.label} (${first.path}), and is also listed by ${direct.label}`,
        fix: 'keep one direct target per model; remove this entry or rename the model.',
      });
    } else if (!direct.catalog) {
      // The same model and target twice in routes[] (one provider's own repeats are reported above).
      problems.push({
        path: direct.path,
        message: `model "${direct.model}" is already routed to ${direct.label.replace(/^route to /, '')} by ${first.path.replace(/\.model$/, '')}; only the first route would be used`,
        fix: 'remove this route, or merge its upstream into the first one.',
      });
    }
  }
  return problems;
}

/** A model name listed twice in one provider's `models`: the later entry is reported, naming the first. */
function modelsListedTwice(config: EdgeConfig): SemanticProblem[] {
  const problems: SemanticProblem[] = [];
  config.nodes.forEach((node, n) =>
    node.providers.forEach((provider, i) => {
      const first = new Map<string, number>();
      provider.models.forEach((entry, m) => {
        const { name } = modelNames(entry);
        const k = first.get(name);
        if (k === undefined) return void first.set(name, m);
        problems.push({
          path: `nodes[${n}].providers[${i}].models[${m}]`,
          message: `model "${name}" is listed twice by provider "${provider.id}" (models[${k}] and models[${m}]); only the first entry would be used`,
          fix: `keep one entry for "${name}": remove this one, or put the upstream name you want in models[${k}] ({name: ${name}, upstream: <upstream name>}).`,
        });
      });
    }),
  );
  return problems;
}
