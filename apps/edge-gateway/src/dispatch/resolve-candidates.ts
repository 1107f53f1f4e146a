import { resolveRoute, type HealthStore, type Route } from '@iop/dispatch';
import type { EdgeConfig } from '@iop/validate';
import { modelNotFound } from '../errors';

/** A request's route, and the half-open providers it may try, from one look at provider health. */
export interface ResolvedCandidates {
  route: Route;
  /** Half-open providers whose trial nobody holds; undefined without a health store. */
  trialsDue: ReadonlySet<string> | undefined;
}

/**
 * The routes of a config with no provider left out, by model: `resolveRoute` is pure of the config
 * and the model, so each is built once per config (a refresh brings a new config object) and shared,
 * never mutated, by every request while all its providers are in health. Only models the config
 * serves are kept, so the map is bounded by the config's names.
 */
const healthyRoutes = new WeakMap<EdgeConfig, Map<string, Route>>();

/** The route of `model` with the providers in `exclude` left out; built once per config when none is. */
function routeOf(config: EdgeConfig, model: string, exclude: ReadonlySet<string> | undefined): Route | undefined {
  if (exclude !== undefined && exclude.size > 0) return resolveRoute(config, model, { exclude });
  let routes = healthyRoutes.get(config);
  if (routes === undefined) healthyRoutes.set(config, (routes = new Map()));
  let route = routes.get(model);
  if (route === undefined) {
    route = resolveRoute(config, model);
    if (route !== undefined) routes.set(model, route);
  }
  return route;
}

/**
 * Resolves the route of `model` (docs/architecture.md, "Request path") with provider health applied
 * (README "Provider health"): providers out of health (unhealthy, backing off, half-open, on trial)
 * are not candidates, except the half-open ones whose trial nobody holds yet, which stay so that
 * this request may claim one ({@link claimTrial}). The route is shared between requests: read it, never change it.
 * @throws ApiError 404 `model_not_found` when nothing in the config serves `model`.
 */
export function resolveCandidates(
  health: HealthStore | undefined,
  config: EdgeConfig,
  model: string,
): ResolvedCandidates {
  const out = health?.unhealthy();
  const due = health?.trialsDue();
  const exclude = out && due && due.size > 0 ? new Set([...out].filter((id) => !due.has(id))) : out;
  const route = routeOf(config, model, exclude);
  if (!route) throw modelNotFound(model);
  return { route, trialsDue: due };
}
