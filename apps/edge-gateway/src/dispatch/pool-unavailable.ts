import { resolveRoute, type HealthStore } from '@iop/dispatch';
import type { EdgeConfig } from '@iop/validate';
import { ApiError, catalogError } from '../errors';
import { admissionToApiError } from '../http/answer/admission-errors';

/** 503 `no_available_provider` with `Retry-After` (README "Errors"). */
export function noAvailableProvider(model: string, retryAfterS: number): ApiError {
  return admissionToApiError({
    code: 'no_available_provider',
    message: `No healthy provider can serve model "${model}" right now.`,
    retryAfterS,
  });
}

/**
 * The answer when no candidate is left (README "Provider health"): a 429 when every provider of the
 * model is backing off after an upstream 429 (with the soonest end of those back-offs), else 503
 * `no_available_provider` with `Retry-After` the soonest time one of them may be tried again (5 s
 * when unknown).
 */
export function poolUnavailable(health: HealthStore | undefined, config: EdgeConfig, model: string): ApiError {
  const all = resolveRoute(config, model);
  const ids = all?.providerPool ? all.candidates.map((c) => c.providerId) : [];
  const views = health?.views();
  const now = Date.now();
  const waits = ids.flatMap((id) => {
    const at = views?.get(id)?.retryAt;
    return at == null ? [] : [Math.max(1, Math.ceil((at - now) / 1000))];
  });
  const retryAfterS = waits.length > 0 ? Math.min(...waits) : 5;
  if (ids.length > 0 && ids.every((id) => views?.get(id)?.state === 'backoff')) {
    return catalogError(
      'rate_limit_exceeded',
      `Every provider of model "${model}" is rate limited by its upstream; retry after ${retryAfterS} s.`,
      {
        retryAfterS,
      },
    );
  }
  return noAvailableProvider(model, retryAfterS);
}
