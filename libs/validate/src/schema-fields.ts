import { z } from 'zod';

/** Field shapes the schemas of `edge.yaml` share (`schema.ts`, `gateway-schema.ts`). */

/** An id of a node, adapter or provider. */
export const id = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'use letters, digits, ".", "_" or "-", starting with a letter or digit');

/** `host:port`, e.g. `127.0.0.1:8080` or `[::1]:8080`. */
export const listen = z
  .string()
  .regex(/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'write it as host:port, e.g. 127.0.0.1:8080')
  .refine((text) => Number(text.slice(text.lastIndexOf(':') + 1)) <= 65535, 'the port must be from 0 to 65535');

export const httpUrl = z.url({ protocol: /^https?$/, error: 'write a full http:// or https:// URL' });
export const positiveMs = z.number().int().positive();

/**
 * A key a client presents as `Authorization: Bearer <key>`: printable ASCII without spaces. HTTP
 * carries header values as ASCII and clients trim surrounding spaces, so any other key could never
 * match (README "Security").
 */
export const apiKey = z
  .string()
  .min(1, 'write the key (e.g. "${TEAM_KEY}", with TEAM_KEY set in the environment), or remove the empty entry')
  .regex(
    /^[\x21-\x7e]+$/,
    'an API key must be printable ASCII without spaces (no accents or other non-ASCII characters, no surrounding or inner spaces): a client sends it in an HTTP header, so any other key could never match',
  );

/**
 * The JSON Schema key of a default in words, for a setting whose default the schema does not apply
 * itself (computed elsewhere, or "none"): `.meta({ description, [DEFAULT_IN_WORDS]: 'half of max_connections' })`.
 * Emitted into `edge.schema.json` as is (editors ignore unknown keywords) and shown in the Default
 * column of docs/configuration.md (`config-reference.ts`).
 */
export const DEFAULT_IN_WORDS = 'x-default';
