import { formatProblems, isPoolCategory, loadConfigFile, resolveProviderAdapter } from '@iop/validate';
import { existsSync } from 'node:fs';

/** A pool provider of the fleet's file whose adapter points at one of the fleet's fake GPU servers. */
export interface FleetFileProvider {
  readonly id: string;
  /** Its `max_concurrency` as the file says it. */
  readonly maxConcurrency: number;
  readonly enabled: boolean;
}

/** The stand-in origin of fleet variable `i` while the file is checked: a host name nothing else can use. */
const standInHost = (i: number) => `fleet-upstream-${i}.invalid`;

/**
 * Checks the edge.yaml a local fleet is about to run (README "Running a fleet", `--config`) before
 * any process starts, with the validation the gateways run: `${VAR}`s come from this process's
 * environment, except those the fleet sets itself (`REDIS_URL` and `fleetVariables`), which get
 * stand-in values here.
 * @returns per fleet variable (one fake GPU server each), the pool providers of the file whose
 *   adapter's `base_url` points at it, with their `max_concurrency` as the file says it (empty
 *   when no provider of the file uses that server)
 * @throws Error naming the file and every problem, each with its line, column and fix.
 */
export function checkFleetConfig(
  file: string,
  fleetVariables: readonly string[],
): Map<string, readonly FleetFileProvider[]> {
  if (!existsSync(file)) throw new Error(`${file} does not exist`);
  const standIns: Record<string, string> = { REDIS_URL: 'redis://127.0.0.1:6379' };
  fleetVariables.forEach((name, i) => (standIns[name] = `http://${standInHost(i)}/v1`));
  const loaded = loadConfigFile(file, { ...process.env, ...standIns });
  if (!loaded.ok) throw new Error(`${file} is invalid:\n${formatProblems(file, loaded.problems)}`);
  const byVariable = new Map<string, FleetFileProvider[]>(fleetVariables.map((name) => [name, []]));
  for (const node of loaded.config.nodes) {
    for (const provider of node.providers) {
      if (!isPoolCategory(provider.category) || provider.max_concurrency === undefined) continue;
      const resolved = resolveProviderAdapter(node, provider);
      const adapter = resolved.kind === 'ok' || resolved.kind === 'disabled' ? resolved.adapter : undefined;
      if (adapter === undefined || !('base_url' in adapter)) continue;
      const i = fleetVariables.findIndex((_, k) => new URL(adapter.base_url).hostname === standInHost(k));
      if (i === -1) continue;
      byVariable.get(fleetVariables[i])?.push({
        id: provider.id,
        maxConcurrency: provider.max_concurrency,
        enabled: provider.enabled && adapter.enabled,
      });
    }
  }
  return byVariable;
}

/**
 * What a fake GPU server serves, in words, for the fleet's start-up lines: `provider llama-a,
 * max_concurrency 2`, `providers a (max_concurrency 1), b (max_concurrency 2)`, or that no provider
 * of the file uses it (`variable` names the `${VAR}` it would be reached by).
 */
export function describeServed(providers: readonly FleetFileProvider[], variable: string): string {
  const one = (p: FleetFileProvider) => `max_concurrency ${p.maxConcurrency}${p.enabled ? '' : ', disabled'}`;
  if (providers.length === 0) return `no provider of the file uses it (\${${variable}})`;
  if (providers.length === 1) return `provider ${providers[0].id}, ${one(providers[0])}`;
  return `providers ${providers.map((p) => `${p.id} (${one(p)})`).join(', ')}`;
}
