import type { ProviderCounts } from '@iop/dispatch';
import { edgeConfigSchema, type EdgeConfig, type EdgeConfigInput } from '@iop/validate';
import type { ResourceStatus, StatusSnapshot } from '../snapshot/snapshot';

/** The configs and readers of `buildSnapshot`'s specs (`snapshot/build-snapshot*.spec.ts`). */

/** Schema-parsed config (defaults applied) without the semantic checks, so broken references can be expressed. */
export const cfg = (nodes: EdgeConfigInput['nodes'], routes: EdgeConfigInput['routes'] = []): EdgeConfig =>
  edgeConfigSchema.parse({ version: 1, nodes, routes });

/** A counts source holding `entries`, by provider id. */
export const counts = (entries: Record<string, ProviderCounts>) => new Map(Object.entries(entries));
/** The snapshots' clock. */
export const NOW = new Date('2026-01-01T00:00:00.000Z');
/** The node `nodeId` of a snapshot. */
export const only = (s: StatusSnapshot, nodeId: string) => s.nodes.find((n) => n.node_id === nodeId)!;
/** The resource `id` of a snapshot, on whichever node. */
export const byId = (s: StatusSnapshot, id: string): ResourceStatus =>
  s.nodes.flatMap((n) => n.resources).find((r) => r.id === id)!;

/** An HTTP adapter's config. */
export const http = (id: string, type: 'vllm' | 'ollama' | 'openai_compat', enabled = true) => ({
  id,
  type,
  base_url: 'http://127.0.0.1:9/v1',
  enabled,
});
/** A CLI adapter's config. */
export const cli = (id: string, enabled = true) => ({ id, type: 'cli' as const, command: ['my-llm'], enabled });
