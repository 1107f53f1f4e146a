import { z } from 'zod';
import { edgeConfigSchema } from './schema';

/**
 * The JSON Schema (draft 2020-12) of `edge.yaml` for editors (README "Configuration"), generated from
 * `edgeConfigSchema` on the input side: keys with defaults are optional. Checked in as
 * `libs/validate/edge.schema.json`; `json-schema.spec.ts` fails when that copy drifts.
 * Does not cover the semantic rules or `${VAR}` interpolation (values are checked as written).
 */
export function edgeConfigJsonSchema(): Record<string, unknown> {
  const { $schema, ...rest } = z.toJSONSchema(edgeConfigSchema, { io: 'input' });
  return {
    $schema,
    $id: 'urn:iop:edge-config:v1',
    title: 'edge.yaml',
    description:
      'Configuration of the IOP edge gateway and status exporter, version 1 (README, section Configuration).',
    ...rest,
  };
}
