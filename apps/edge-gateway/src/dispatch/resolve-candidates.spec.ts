import { MemoryHealthStore } from '@iop/dispatch';
import { parseConfigText, type EdgeConfig } from '@iop/validate';
import { ApiError } from '../errors';
import { resolveCandidates } from './resolve-candidates';

/** A config of one node with two pool providers of `m` (the second can be disabled) and one of `n`. */
function config(secondEnabled = true): EdgeConfig {
  const result = parseConfigText(
    `version: 1
nodes:
  - id: n1
    adapters:
      - { id: up, type: openai_compat, base_url: "http://127.0.0.1:9/v1" }
    providers:
      - { id: p1, category: openai_compat, adapter: up, models: [m], max_concurrency: 4 }
      - { id: p2, category: openai_compat, adapter: up, models: [m, n], max_concurrency: 4, enabled: ${secondEnabled} }
`,
    {},
  );
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result.config;
}

const ids = (c: EdgeConfig, model: string, health?: MemoryHealthStore) => {
  const { route } = resolveCandidates(health, c, model);
  return route.providerPool ? route.candidates.map((p) => p.providerId) : [];
};

describe('resolveCandidates (docs/architecture.md, "Request path"; README "Provider health")', () => {
  it('gives the same route to every request of a config, and a refreshed config its own', () => {
    const first = config();
    expect(resolveCandidates(undefined, first, 'm').route).toBe(resolveCandidates(undefined, first, 'm').route);
    expect(ids(first, 'm')).toEqual(['p1', 'p2']);
    // A refresh that disables p2: the new config's route, never the one built for the old file.
    expect(ids(config(false), 'm')).toEqual(['p1']);
    expect(ids(first, 'm')).toEqual(['p1', 'p2']);
  });

  it('leaves out a provider out of health even once the route of every provider was built, and takes it back after', async () => {
    const c = config();
    const health = new MemoryHealthStore(() => ({ unhealthy_after: 1, healthy_after: 1 }));
    expect(ids(c, 'm', health)).toEqual(['p1', 'p2']);
    await health.backOff('p1', 60, 'upstream 429');
    expect(ids(c, 'm', health)).toEqual(['p2']);
    expect(ids(c, 'n', health)).toEqual(['p2']);
    await health.refresh([]);
    expect(ids(c, 'm', health)).toEqual(['p1', 'p2']);
  });

  it('answers a model nothing serves 404 model_not_found, every time', () => {
    const c = config();
    for (let i = 0; i < 2; i++) {
      let thrown: unknown;
      try {
        resolveCandidates(undefined, c, 'unknown-model');
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(ApiError);
      expect((thrown as ApiError).code).toBe('model_not_found');
    }
  });
});
