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
 * Resolves the route of `model` (docs/architecture.md, "Request path") with provider health applied
 * (README "Provider health"): providers out of health (unhealthy, backing off, half-open, on trial)
 * are not candidates, except the half-open ones whose trial nobody holds yet, which stay so that
 * this request may claim one ({@link claimTrial}).
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
  const route = resolveRoute(config, model, { exclude });
  if (!route) throw modelNotFound(model);
  return { route, trialsDue: due };
}
