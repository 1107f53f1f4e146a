import { watch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import { configDigest } from './config-digest';
import { formatProblems, type ConfigProblem } from './config-problem';
import { loadConfigFile, type LoadOptions } from './load-config';
import type { LibLogger } from './lib-logger';
import type { EdgeConfig } from './schema';

/** The log calls the runtime makes: the libs' one logger shape, {@link LibLogger} (pino's `(obj, msg)`). */
export type RuntimeLogger = LibLogger;

/** The config in force, with what identifies it in `/status`. */
export interface LoadedConfig {
  readonly config: EdgeConfig;
  /** sha256 hex of the file's bytes (a reload of the same bytes applies nothing); not `config_hash` (`configDigest`). */
  readonly hash: string;
  readonly loadedAt: Date;
}

/** The outcome of one reload attempt. */
export type ReloadResult = { outcome: 'applied' | 'unchanged' } | { outcome: 'rejected'; problems: ConfigProblem[] };

export interface ConfigRuntimeOptions {
  /** Re-applies command-line overrides (`--redis`, `--listen`) to every loaded file. */
  transform?: (config: EdgeConfig) => EdgeConfig;
  /** Called with the new config before it becomes current (e.g. `queue.configure`). A throw rejects the reload. */
  apply?: (next: LoadedConfig, previous: LoadedConfig) => Promise<void>;
  /** Called for every rejected file (for the `iop_edge_config_reload_failures_total` metric). */
  onRejected?: (problems: ConfigProblem[]) => void;
  env?: Record<string, string | undefined>;
  /** How each reload reads the file, as the first load did (`readProcessStart`'s `flags.load`). */
  load?: LoadOptions;
  logger: RuntimeLogger;
}

/**
 * Runtime config refresh (docs/architecture.md, "Settings"), for the gateway and the exporter alike: holds the config in
 * force and swaps it atomically for a new,
 * fully validated file on `reload()` (SIGHUP) or when the file changes (debounced). An invalid
 * file is rejected with the same problems as `validate`, logged, counted, and the running config
 * stays. Requests read `current` once when they start, so admitted requests finish on the config
 * they started with.
 */
export class ConfigRuntime {
  private loaded: LoadedConfig;
  private watcher?: FSWatcher;
  private debounce?: NodeJS.Timeout;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(
    readonly file: string,
    initial: LoadedConfig,
    private readonly opts: ConfigRuntimeOptions,
  ) {
    this.loaded = initial;
  }

  get current(): LoadedConfig {
    return this.loaded;
  }

  /** Loads, validates and applies the file; serialised, so overlapping triggers apply in order. Never throws. */
  reload(reason: string): Promise<ReloadResult> {
    const run = this.chain.then(() => this.reloadNow(reason));
    this.chain = run.catch(() => undefined);
    return run;
  }

  /** Watches the file's directory (editors and config maps replace the file by rename) and reloads `debounceMs` after the last change. */
  watch(debounceMs = 250): void {
    const base = path.basename(this.file);
    this.watcher = watch(path.dirname(path.resolve(this.file)), (_event, name) => {
      if (name && name !== base && !name.startsWith('..')) return;
      clearTimeout(this.debounce);
      this.debounce = setTimeout(() => void this.reload('file changed'), debounceMs);
    });
    this.watcher.on('error', (err) => this.opts.logger.warn({ err }, 'config watch failed; SIGHUP still reloads'));
  }

  close(): void {
    clearTimeout(this.debounce);
    this.watcher?.close();
  }

  private async reloadNow(reason: string): Promise<ReloadResult> {
    const result = loadConfigFile(this.file, this.opts.env ?? process.env, this.opts.load);
    if (!result.ok) {
      this.opts.logger.error(
        { reason, file: this.file, problems: result.problems.length },
        `config reload rejected; the running config stays\n${formatProblems(this.file, result.problems)}`,
      );
      this.opts.onRejected?.(result.problems);
      return { outcome: 'rejected', problems: result.problems };
    }
    if (result.hash === this.loaded.hash) {
      // Said as such, so an operator who sent SIGHUP knows the file was read and nothing changed.
      this.opts.logger.info(
        { reason, config_hash: shortDigest(this.loaded.config), file_sha256: result.hash.slice(0, 12) },
        'config reload: the file is unchanged; nothing to apply',
      );
      return { outcome: 'unchanged' };
    }
    const next: LoadedConfig = {
      config: this.opts.transform ? this.opts.transform(result.config) : result.config,
      hash: result.hash,
      loadedAt: new Date(),
    };
    const previous = this.loaded;
    try {
      await this.opts.apply?.(next, previous);
    } catch (err) {
      const problem: ConfigProblem = {
        path: '',
        line: 0,
        column: 0,
        message: `applying the config failed: ${(err as Error).message}`,
        fix: 'check the queue backend (Redis) and retry the reload.',
      };
      this.opts.logger.error({ reason, err }, 'config reload could not be applied; the running config stays');
      this.opts.onRejected?.([problem]);
      return { outcome: 'rejected', problems: [problem] };
    }
    this.loaded = next;
    this.opts.logger.info(
      { reason, config_hash: shortDigest(next.config), file_sha256: next.hash.slice(0, 12) },
      'config reloaded',
    );
    return { outcome: 'applied' };
  }
}

/**
 * The config's digest as `iop_edge_config_info{hash}` carries it (its first 12 hex digits; README
 * "Status: `/status`, `/metrics` and the status exporter"), for log lines: the file's own sha256 is
 * logged apart, as `file_sha256`.
 */
function shortDigest(config: EdgeConfig): string {
  return configDigest(config).slice(0, 12);
}
