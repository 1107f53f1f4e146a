import { z } from 'zod';

/**
 * The environment variables the gateway and the exporter read, validated once at start (README
 * "Environment variables"). `REDIS_URL` is not here: `resolveQueueBackend` checks it, with its
 * password redacted; `${VAR}` in edge.yaml are checked by the config loader.
 */

/** pino's level names. */
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** An empty variable counts as unset, as for `REDIS_URL`. */
const unsetIfEmpty = (v: unknown) => (v === '' ? undefined : v);

const logLevel = z.preprocess(
  unsetIfEmpty,
  z.enum(LOG_LEVELS, { error: `one of ${LOG_LEVELS.join(', ')}` }).default('info'),
);

/** A whole number of milliseconds, 0 or more (digits only: no unit, sign, exponent or fraction). */
const milliseconds = () =>
  z
    .string()
    .regex(/^\d{1,12}$/, { error: 'a whole number of milliseconds, 0 or more (e.g. 30000)' })
    .transform(Number);

/** The gateway's environment: `LOG_LEVEL`, `IOP_SHUTDOWN_GRACE_MS`, `OTEL_BSP_SCHEDULE_DELAY`. */
export const gatewayEnvironmentSchema = z.object({
  LOG_LEVEL: logLevel,
  /** Longest a SIGTERM waits for in-flight requests before closing the rest, in ms. */
  IOP_SHUTDOWN_GRACE_MS: z.preprocess(unsetIfEmpty, milliseconds().default(30_000)),
  /** Delay between two batches of spans, in ms; read by the tracing code when tracing is on. */
  OTEL_BSP_SCHEDULE_DELAY: z.preprocess(unsetIfEmpty, milliseconds().optional()),
});
export type GatewayEnvironment = z.infer<typeof gatewayEnvironmentSchema>;

/** The status exporter's environment: `LOG_LEVEL`. */
export const exporterEnvironmentSchema = z.object({ LOG_LEVEL: logLevel });
export type ExporterEnvironment = z.infer<typeof exporterEnvironmentSchema>;

/** An environment variable with a value its process cannot use; `message` names the variable, its value and what is expected. */
export class EnvironmentError extends Error {
  override name = 'EnvironmentError';
}

/**
 * Parses the variables `schema` names out of `env` (other variables are ignored).
 * @returns the typed values, defaults filled in
 * @throws EnvironmentError listing, one per line, each bad variable as `NAME="value": expected …`
 */
export function readEnvironment<S extends z.ZodObject>(
  schema: S,
  env: Record<string, string | undefined>,
): z.output<S> {
  const picked = Object.fromEntries(Object.keys(schema.shape).map((name) => [name, env[name]]));
  const result = schema.safeParse(picked);
  if (result.success) return result.data;
  const lines = result.error.issues.map((issue) => {
    const name = String(issue.path[0]);
    return `environment variable ${name}=${JSON.stringify(env[name])}: expected ${issue.message}`;
  });
  throw new EnvironmentError(lines.join('\n'));
}
