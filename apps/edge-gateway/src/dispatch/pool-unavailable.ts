import { resolveRoute, type HealthStore } from '@iop/dispatch';
import { ERROR_CATALOG } from '@iop/errors';
import type { EdgeConfig } from '@iop/validate';
import { ApiError } from '../errors';

/**
 * The answer when no candidate is left (README "Provider health"): a 429 when every provider of the
 * model is backing off after an upstream 429 (with the soonest end of those back-offs), else 503
 * `no_available_provider` with `Retry-After` the soonest time one of them may be tried again (the
 * catalog's default when unknown).
 */
export function poolUnavailable(health: HealthStore | undefined, config: EdgeConfig, model: string): ApiError {
  const all = resolveRoute(config, model);
  const ids = all?.providerPool ? all.candidates.map((c) => c.providerId) : [];
  const views = health?.views();
  // The views' times are on the store's clock (Redis's when shared), not necessarily this process's.
  const now = health?.now() ?? Date.now();
  const waits = ids.flatMap((id) => {
    const at = views?.get(id)?.retryAt;
    return at == null ? [] : [Math.max(1, Math.ceil((at - now) / 1000))];
  });
  const retryAfterS = waits.length > 0 ? Math.min(...waits) : ERROR_CATALOG.no_available_provider.retryAfterS;
  if (ids.length > 0 && ids.every((id) => views?.get(id)?.state === 'backoff')) {
    return new ApiError({ code: 'rate_limit_exceeded', fields: { model, retryAfterS }, retryAfterS });
  }
  return new ApiError({ code: 'no_available_provider', fields: { model }, retryAfterS });
}
