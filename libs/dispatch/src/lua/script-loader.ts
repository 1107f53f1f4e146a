import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import { isOutOfMemory, type RedisClient } from '../queue/redis-connection';
import {
  functionLibraryText,
  evalModeOf,
  isFunctionMissing,
  loadLibrary,
  refusesFunctions,
  type ScriptParts,
} from './function-library';

/**
 * The `.lua` files of one scripts folder, by path relative to that folder without `.lua`
 * (`admit`, `includes/grant`), each the text of `import text from './admit.lua'` (`lua-file.d.ts`).
 */
export type LuaSources = Readonly<Record<string, string>>;

/**
 * What every script answers (docs/architecture.md, "Lua scripts"): an array whose first element is a
 * status word, then string values (`{'granted', qname}`, `{'renewed', lostJobId...}`).
 */
export interface ScriptReply<S extends string> {
  readonly status: S;
  readonly values: readonly string[];
}

/** `--- @include "<path>"` on a line of its own: a path relative to the including file, without `.lua` (BullMQ's convention). */
const INCLUDE_LINE = /^---[ \t]*@include[ \t]+"([^"]+)"[ \t]*\r?\n?/gm;

/** The include paths a `.lua` text names, as written, in order. */
export function includesOf(text: string): string[] {
  return [...text.matchAll(INCLUDE_LINE)].map((m) => m[1]);
}

/**
 * Script `name` of `sources` split where its includes go: its file, with every include it names
 * (directly or through other includes) inlined once, in dependency order (an include comes before
 * every file that names it, so each local function is declared before its first use), at the place of
 * the script's first include line. The same sources give the same parts, whatever their key order.
 * @throws Error naming the chain when a file is missing or includes form a cycle.
 */
export function buildScriptParts(name: string, sources: LuaSources): ScriptParts {
  const source = (path: string, chain: readonly string[]) => {
    if (!Object.hasOwn(sources, path))
      throw new Error(`lua file ${path}.lua not found (${[...chain, path].join(' > ')})`);
    return sources[path];
  };
  const ordered: string[] = [];
  const visiting = new Set<string>();
  const visit = (path: string, chain: readonly string[]) => {
    if (ordered.includes(path)) return;
    if (visiting.has(path)) throw new Error(`lua include cycle: ${[...chain, path].join(' > ')}`);
    visiting.add(path);
    for (const include of includesOf(source(path, chain)))
      visit(posix.join(posix.dirname(path), include), [...chain, path]);
    visiting.delete(path);
    ordered.push(path);
  };
  visit(name, []);
  const includes = ordered
    .slice(0, -1)
    .map((path) => sources[path].replace(INCLUDE_LINE, '').trim() + '\n')
    .join('');
  const own = sources[name];
  const first = new RegExp(INCLUDE_LINE.source, 'm').exec(own)?.index ?? 0;
  return { head: own.slice(0, first), includes, body: own.slice(first).replace(INCLUDE_LINE, '') };
}

/** The text `EVAL` runs for script `name` of `sources`: {@link buildScriptParts} joined. @throws as `buildScriptParts`. */
export function buildScriptText(name: string, sources: LuaSources): string {
  const { head, includes, body } = buildScriptParts(name, sources);
  return head + includes + body;
}

/** Every script defined in this process, by name: for `scriptCallCounts`. */
const DEFINED = new Map<string, LuaScript<string>>();

/** What a script is defined with besides its sources. */
export interface ScriptOptions<S extends string> {
  /**
   * How many of its arguments are keys (`KEYS`); the rest are `ARGV`. With `variadicKeys`, the least
   * number: the keys it always takes.
   */
  readonly numberOfKeys: number;
  /**
   * True for a script that takes a variadic tail of keys after its `numberOfKeys` (header
   * `KEYS[<numberOfKeys + 1>..]`), all of the same Cluster slot: a script names every key it touches
   * in KEYS (Redis "EVAL" documentation). @defaultValue false
   */
  readonly variadicKeys?: boolean;
  /** The status words it may answer (the first element of its reply). */
  readonly statuses: readonly S[];
  /**
   * True for a script that ends or keeps up what exists (a lease, a waiter, a reservation) and must
   * run while Redis is over `maxmemory`, as ending a lease frees memory (Redis flag `allow-oom`);
   * false (the default) for one that adds state, such as admission, which Redis then refuses with an
   * `OOM` error before it runs (docs/architecture.md, "Lua scripts"). @defaultValue false
   */
  readonly allowOom?: boolean;
}

/**
 * One Lua script as the Redis backends run it (docs/architecture.md, "Lua scripts"): its text built
 * from its `.lua` file and includes, its SHA-1, and the same code as a Redis Functions library. `run`
 * calls the function with `FCALL`, loading the library first when Redis answers that it does not
 * hold it (first call, a restart, `FUNCTION FLUSH`); on a Redis without Functions (before 7.0, or
 * an ACL user without `FCALL`) it sends `EVALSHA` and, on `NOSCRIPT`, `EVAL` with the text. On a
 * Cluster ioredis routes each call by the slot of the first key, and a library is loaded on every
 * master.
 */
export class LuaScript<S extends string> {
  /** The script's own file (header, include lines, body). */
  readonly source: string;
  /** The text `EVAL` runs: `source` with its includes inlined. */
  readonly lua: string;
  /** SHA-1 of `lua`, hex: the `EVALSHA` name. */
  readonly sha: string;
  /**
   * `lua` with the library's flags in a `#!lua` line (`#!lua flags=allow-oom`), for `EVALSHA` on a
   * Redis 7.0 or later whose ACL refuses Functions; `lua` itself for a script without flags.
   */
  readonly flaggedLua: string;
  /** SHA-1 of `flaggedLua`, hex. */
  readonly flaggedSha: string;
  /** Name of its Redis Functions library and of the library's one function: `iop_<name>_<hash of the library>`. */
  readonly functionName: string;
  /** The library `FUNCTION LOAD` takes. */
  readonly library: string;
  /** How many of its arguments are keys (`ScriptOptions.numberOfKeys`); the least number with `variadicKeys`. */
  readonly numberOfKeys: number;
  /** Whether more keys may follow the `numberOfKeys` (`ScriptOptions.variadicKeys`). */
  readonly variadicKeys: boolean;
  /** The status words it may answer (`ScriptOptions.statuses`). */
  readonly statuses: readonly S[];
  /** Whether it runs while Redis is over `maxmemory` (`ScriptOptions.allowOom`). */
  readonly allowOom: boolean;
  private runs = 0;
  /** A library load in flight per client, so that calls that all found it missing load it once. */
  private readonly loading = new WeakMap<RedisClient, Promise<void>>();

  /** Use `defineScript`. */
  constructor(
    readonly name: string,
    /** Every `.lua` file of the script's folder (the script's own and its includes). */
    readonly sources: LuaSources,
    opts: ScriptOptions<S>,
  ) {
    const parts = buildScriptParts(name, sources);
    this.numberOfKeys = opts.numberOfKeys;
    this.variadicKeys = opts.variadicKeys ?? false;
    this.statuses = opts.statuses;
    this.allowOom = opts.allowOom ?? false;
    this.lua = parts.head + parts.includes + parts.body;
    this.source = sources[name];
    this.sha = createHash('sha1').update(this.lua).digest('hex');
    this.flaggedLua = opts.allowOom ? `#!lua flags=allow-oom\n${this.lua}` : this.lua;
    this.flaggedSha = createHash('sha1').update(this.flaggedLua).digest('hex');
    const stem = `iop_${name.replace(/[^A-Za-z0-9]/g, '_')}_`;
    const hash = createHash('sha1')
      .update(functionLibraryText(stem, parts, opts.allowOom ?? false))
      .digest('hex');
    this.functionName = stem + hash.slice(0, 16);
    this.library = functionLibraryText(this.functionName, parts, opts.allowOom ?? false);
  }

  /** Calls of `run` in this process so far (one per script execution asked for, retries not counted). */
  get calls(): number {
    return this.runs;
  }

  /**
   * Runs the script once.
   * @param keys exactly `numberOfKeys` keys (at least that many with `variadicKeys`); all on one Cluster slot.
   * @throws the Redis error (connection lost, command timeout, a script error, `OOM` for a script
   *   without `allowOom` while Redis is over `maxmemory`), or Error when the reply is not one of this
   *   script's status words followed by strings.
   */
  async run(client: RedisClient, keys: readonly string[], args: readonly (string | number)[]): Promise<ScriptReply<S>> {
    if (this.variadicKeys ? keys.length < this.numberOfKeys : keys.length !== this.numberOfKeys)
      throw new Error(
        `script ${this.name} takes ${this.variadicKeys ? 'at least ' : ''}${this.numberOfKeys} keys, got ${keys.length}`,
      );
    this.runs++;
    if (evalModeOf(client) !== undefined) return decodeReply(this, await this.evalSha(client, keys, args));
    try {
      return decodeReply(this, await client.fcall(this.functionName, keys.length, ...keys, ...args));
    } catch (e) {
      if (refusesFunctions(client, e)) return decodeReply(this, await this.evalSha(client, keys, args));
      if (!isFunctionMissing(e)) throw e;
    }
    try {
      await this.load(client);
    } catch (e) {
      if (refusesFunctions(client, e)) return decodeReply(this, await this.evalSha(client, keys, args));
      // Over maxmemory FUNCTION LOAD is refused; a script that ends or keeps up state must still run, and
      // EVAL reads the same allow-oom flag from the text's #!lua line (docs/architecture.md, "Redis over maxmemory").
      if (this.allowOom && isOutOfMemory(e)) return decodeReply(this, await this.evalSha(client, keys, args, true));
      throw e;
    }
    return decodeReply(this, await client.fcall(this.functionName, keys.length, ...keys, ...args));
  }

  /** `FUNCTION LOAD` of the library, once for calls that found it missing together. @throws the Redis error. */
  private load(client: RedisClient): Promise<void> {
    let pending = this.loading.get(client);
    if (pending === undefined) {
      pending = loadLibrary(client, this.library).finally(() => this.loading.delete(client));
      this.loading.set(client, pending);
    }
    return pending;
  }

  /**
   * `EVALSHA`, and `EVAL` with the text when Redis answers `NOSCRIPT`: the text with the library's
   * flags where Redis can read them (`eval-flags`, or `flagged`: a Redis 7 that refused to load the
   * library over `maxmemory`), so that a script with `allowOom` still runs over
   * `maxmemory`; the plain text on a Redis before 7.0. @throws the Redis error.
   */
  private async evalSha(
    client: RedisClient,
    keys: readonly string[],
    args: readonly (string | number)[],
    flagged = evalModeOf(client) === 'eval-flags',
  ) {
    try {
      return await client.evalsha(flagged ? this.flaggedSha : this.sha, keys.length, ...keys, ...args);
    } catch (e) {
      if (!(e instanceof Error) || !e.message.startsWith('NOSCRIPT')) throw e;
      return client.eval(flagged ? this.flaggedLua : this.lua, keys.length, ...keys, ...args);
    }
  }
}

/**
 * Defines script `name` of `sources` (its file `<name>.lua`) with the status words it may answer.
 * @throws Error when a file or an include is missing, includes form a cycle, or `name` is already defined.
 */
export function defineScript<const S extends string>(
  name: string,
  sources: LuaSources,
  opts: ScriptOptions<S>,
): LuaScript<S> {
  if (DEFINED.has(name)) throw new Error(`script ${name} is defined twice`);
  const script = new LuaScript(name, sources, opts);
  DEFINED.set(name, script);
  return script;
}

/**
 * The one decoder of script replies: `{status, values}` from a Redis array reply.
 * @throws Error when `reply` is not an array of strings whose first element is one of `script.statuses`.
 */
export function decodeReply<S extends string>(
  script: { readonly name: string; readonly statuses: readonly S[] },
  reply: unknown,
): ScriptReply<S> {
  if (Array.isArray(reply) && reply.every((x): x is string => typeof x === 'string')) {
    const [status, ...values] = reply;
    const match = script.statuses.find((s) => s === status);
    if (match !== undefined) return { status: match, values };
  }
  throw new Error(`script ${script.name} answered ${JSON.stringify(reply)}`);
}

/**
 * Script runs asked for by this process, by script name (every script defined so far, 0 when never
 * run): what each request costs in scripts, next to `INFO commandstats`, which counts every `FCALL` (or `EVALSHA`) as one.
 */
export function scriptCallCounts(): Record<string, number> {
  return Object.fromEntries([...DEFINED].map(([name, script]) => [name, script.calls]));
}
