import { catalogAnswer } from './error-answer';

// The README "Errors" table is checked against ERROR_CATALOG by tools/fleet/src/docs/readme-errors.spec.ts
// (the project whose tests read the README, so a README change runs them: README "CI with nx affected").

describe('catalogAnswer', () => {
  it('builds the OpenAI-shaped body with the catalog status and type', () => {
    expect(catalogAnswer('invalid_api_key', 'no key')).toEqual({
      status: 401,
      headers: {},
      body: { error: { message: 'no key', type: 'invalid_request_error', param: null, code: 'invalid_api_key' } },
    });
  });

  it('sends Retry-After for codes that carry one, the caller value first', () => {
    expect(catalogAnswer('queue_full', 'full').headers).toEqual({ 'retry-after': '1' });
    expect(catalogAnswer('queue_timeout', 'late', { retryAfterS: 7 }).headers).toEqual({ 'retry-after': '7' });
    expect(catalogAnswer('queue_full', 'full').body.error.type).toBe('rate_limit_error');
  });
});
