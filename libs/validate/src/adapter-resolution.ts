import type { AdapterConfig, NodeConfig, ProviderConfig } from './schema';
import { ADAPTER_TYPES } from './schema';

/**
 * Outcome of resolving a provider's `adapter` reference on its node (docs/architecture.md, "Usable pool providers"):
 * - `ok`: the adapter the provider dispatches through;
 * - `missing`: no adapter with that id, and (for a type name) no enabled adapter of that type;
 * - `disabled`: the reference names an adapter that is disabled;
 * - `ambiguous`: a type name with two or more enabled adapters of that type (`candidates` lists their ids).
 */
export type AdapterResolution =
  | { kind: 'ok'; adapter: AdapterConfig }
  | { kind: 'missing' }
  | { kind: 'disabled'; adapter: AdapterConfig }
  | { kind: 'ambiguous'; candidates: string[] };

/**
 * Resolves `provider.adapter` on the provider's own node: an exact adapter id wins; otherwise a
 * type name resolves to the single enabled adapter of that type. Used by validation (as errors)
 * and again at run time by candidate resolution (as exclusions), so both apply one rule.
 * Pure; never throws.
 */
export function resolveProviderAdapter(
  node: Pick<NodeConfig, 'adapters'>,
  provider: Pick<ProviderConfig, 'adapter'>,
): AdapterResolution {
  const byId = node.adapters.find((a) => a.id === provider.adapter);
  if (byId) return byId.enabled ? { kind: 'ok', adapter: byId } : { kind: 'disabled', adapter: byId };
  if ((ADAPTER_TYPES as readonly string[]).includes(provider.adapter)) {
    const ofType = node.adapters.filter((a) => a.type === provider.adapter);
    const enabled = ofType.filter((a) => a.enabled);
    if (enabled.length === 1) return { kind: 'ok', adapter: enabled[0] };
    if (enabled.length > 1) return { kind: 'ambiguous', candidates: enabled.map((a) => a.id) };
    if (ofType.length > 0) return { kind: 'disabled', adapter: ofType[0] };
  }
  return { kind: 'missing' };
}
