import type { PoolCandidate } from '@iop/dispatch';
import type { AdapterConfig } from '@iop/validate';
import { ADAPTER_LABEL, FIELD_TABLES } from '../adapters/adapter-registry';
import { applyFieldTable, endpointNotServed } from '../adapters/request-fields';
import type { CompletionEndpoint, DispatchBody } from './dispatcher-deps';

/**
 * The body `adapter` sends for `body` (its field table, README "Request fields per adapter").
 * @throws ApiError 400 naming the first field it cannot carry, or the endpoint it does not serve.
 */
export function carriedBody(adapter: AdapterConfig, endpoint: CompletionEndpoint, body: DispatchBody): DispatchBody {
  const table = FIELD_TABLES[adapter.type][endpoint];
  if (!table) throw endpointNotServed(endpoint, ADAPTER_LABEL[adapter.type]);
  return applyFieldTable(table, body, ADAPTER_LABEL[adapter.type], endpoint);
}

/** The candidates of a pool that can carry a request, and the body each adapter type sends. */
export interface Carriers {
  candidates: PoolCandidate[];
  /** By adapter type: every candidate of one type sends the same body. */
  bodies: Map<string, DispatchBody>;
}

/**
 * The candidates whose adapter can carry `body` (README "Request fields per adapter"), and the body
 * each adapter type sends; each table is applied once per adapter type.
 * @throws ApiError 400 of the first candidate's refusal when no candidate can carry it.
 */
export function carriableCandidates(
  candidates: PoolCandidate[],
  endpoint: CompletionEndpoint,
  body: DispatchBody,
): Carriers {
  const bodies = new Map<string, DispatchBody>();
  const refusals = new Map<string, unknown>();
  for (const c of candidates) {
    const type = c.adapter.type;
    if (bodies.has(type) || refusals.has(type)) continue;
    try {
      bodies.set(type, carriedBody(c.adapter, endpoint, body));
    } catch (err) {
      refusals.set(type, err);
    }
  }
  const able = candidates.filter((c) => bodies.has(c.adapter.type));
  if (able.length === 0 && refusals.size > 0) throw refusals.values().next().value;
  return { candidates: able, bodies };
}
