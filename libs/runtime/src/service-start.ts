import type pino from 'pino';
import type { z } from 'zod';
import { createProcessLogger } from './process-logger';
import { readProcessStart, type ProcessStart, type StartFlags } from './process-start';
import { stopOnSignals, type StopOptions } from './shutdown';

/** A process's start ({@link ProcessStart}) and its logger. */
export interface ServiceStart<E> extends ProcessStart<E> {
  /** The process's logger ({@link createProcessLogger}): `service` on every line, at the environment's `LOG_LEVEL`. */
  readonly logger: pino.Logger;
}

/**
 * The start-up of a service process: {@link readProcessStart} (the environment, with `schema`, then
 * the config file), then the process's logger named `service` at the environment's `LOG_LEVEL`.
 * Problems are written to `stderr`, never thrown.
 * @returns the start, or the exit code to end with: 2 for a bad environment variable, 1 for an invalid file
 */
export function startService<S extends z.ZodObject>(
  service: string,
  schema: S & z.ZodType<{ LOG_LEVEL: pino.LevelWithSilent }>,
  flags: StartFlags,
  processEnv: Record<string, string | undefined> = process.env,
  stderr: { write(text: string): unknown } = process.stderr,
): ServiceStart<z.output<S>> | { exitCode: 1 | 2 } {
  const start = readProcessStart(schema, flags, processEnv, stderr);
  if ('exitCode' in start) return start;
  return { ...start, logger: createProcessLogger(service, start.environment.LOG_LEVEL) };
}

/**
 * The last step of a service's start: installs the SIGTERM and SIGINT handlers ({@link stopOnSignals}
 * with `stop`), then writes the one stdout line scripts and tests wait for the port by,
 * `<service> listening on <url>`. In that order: a signal sent as soon as the line is read stops the
 * process gracefully instead of killing it with the default action.
 * @returns the exit code, 0, once the process has stopped
 */
export function announceListening(
  service: string,
  url: string,
  stop: StopOptions,
  stdout: { write(text: string): unknown } = process.stdout,
): Promise<number> {
  const stopped = stopOnSignals(stop);
  stdout.write(`${service} listening on ${url}\n`);
  return stopped;
}
