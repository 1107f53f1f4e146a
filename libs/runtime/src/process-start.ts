import { formatProblems, loadConfigFile, type EdgeConfig, type LoadOptions } from '@iop/validate';
import type { z } from 'zod';
import { EnvironmentError, readEnvironment } from './environment';

/** The command-line flags both processes share, `--config FILE` and `--redis URL`, and how the file is read. */
export interface StartFlags {
  readonly config: string;
  readonly redis?: string;
  /** How this process reads the file (the status exporter: `EXPORTER_CONFIG_LOAD`); pass the same to its reloads. */
  readonly load?: LoadOptions;
}

/** What a process starts from once its environment and its config file are read. */
export interface ProcessStart<E> {
  /** The validated environment (README "Environment variables"), defaults filled in. */
  readonly environment: E;
  readonly config: EdgeConfig;
  /** sha256 of the file's bytes, as `/status` shows it. */
  readonly hash: string;
  /** The variables `${VAR}` in the file expand from: the process's, with `--redis` as `REDIS_URL`; pass it on to reloads. */
  readonly env: Record<string, string | undefined>;
}

/**
 * The warning for a `--redis` URL that carries credentials (README "Security"): a process's
 * command line is readable by every local user (`/proc/<pid>/cmdline`, `ps`), its environment and
 * files are not. Names no part of the URL. @returns undefined when the URL holds no userinfo.
 */
export function commandLinePasswordWarning(redisFlag: string | undefined): string | undefined {
  if (redisFlag === undefined) return undefined;
  // An "@" anywhere counts too: a password with an unencoded "/" parses as a path, a secret all the same.
  let userinfo = redisFlag.includes('@');
  try {
    const url = new URL(redisFlag);
    userinfo ||= url.password !== '' || url.username !== '';
  } catch {
    // Unparsable: refused later, naming the flag; the "@" test above stands.
  }
  if (!userinfo) return undefined;
  return 'warning: --redis carries credentials, and a command line is readable by every local user (ps, /proc/<pid>/cmdline); pass the URL in REDIS_URL, or as queue.redis_url in the file (with ${VAR}), instead (README "Security")';
}

/**
 * The start-up both the gateway and the exporter run before anything opens: validates the
 * environment (`processEnv`) with `schema`, then loads `flags.config` (README "Configuration"). Problems are written
 * to `stderr`, each with its path, line and fix, and never thrown; so is the warning of a `--redis`
 * URL with a password in it ({@link commandLinePasswordWarning}).
 * @returns the start, or the exit code to end with: 2 for a bad environment variable, 1 for an invalid file
 */
export function readProcessStart<S extends z.ZodObject>(
  schema: S,
  flags: StartFlags,
  processEnv: Record<string, string | undefined> = process.env,
  stderr: { write(text: string): unknown } = process.stderr,
): ProcessStart<z.output<S>> | { exitCode: 1 | 2 } {
  let environment: z.output<S>;
  try {
    environment = readEnvironment(schema, processEnv);
  } catch (err) {
    if (!(err instanceof EnvironmentError)) throw err;
    stderr.write(`${err.message}\nrefusing to start (README "Environment variables")\n`);
    return { exitCode: 2 };
  }
  const warning = commandLinePasswordWarning(flags.redis);
  if (warning) stderr.write(`${warning}\n`);
  // `--redis` is also what `${REDIS_URL}` in the file expands to.
  const env = flags.redis ? { ...processEnv, REDIS_URL: flags.redis } : processEnv;
  const loaded = loadConfigFile(flags.config, env, flags.load);
  if (!loaded.ok) {
    stderr.write(`${formatProblems(flags.config, loaded.problems)}\nrefusing to start: ${flags.config} is invalid\n`);
    return { exitCode: 1 };
  }
  return { environment, config: loaded.config, hash: loaded.hash, env };
}
