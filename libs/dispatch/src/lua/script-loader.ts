import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import type { RedisClient } from '../queue/redis-connection';

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
 * The text Redis runs for script `name` of `sources`: its file, with every include it names (directly
 * or through other includes) inlined once, in dependency order (an include comes before every file
 * that names it, so each local function is declared before its first use), at the place of the
 * script's first include line. The same sources give the same text, whatever their key order.
 * @throws Error naming the chain when a file is missing or includes form a cycle.
 */
export function buildScriptText(name: string, sources: LuaSources): string {
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
  const inlined = ordered
    .slice(0, -1)
    .map((path) => sources[path].replace(INCLUDE_LINE, '').trim() + '\n')
    .join('');
  let first = true;
  return sources[name].replace(INCLUDE_LINE, () => {
    const replacement = first ? inlined : '';
    first = false;
    return replacement;
  });
}

/** Every script defined in this process, by name: for `scriptCallCounts`. */
const DEFINED = new Map<string, LuaScript<string>>();

/**
 * One Lua script as the Redis backends run it (docs/architecture.md, "Lua scripts"): its text built
 * from its `.lua` file and includes, and its SHA-1. `run` sends `EVALSHA` and, when Redis answers
 * `NOSCRIPT` (first call, a restart, `SCRIPT FLUSH`), `EVAL` with the text, on a single Redis as on a
 * Cluster (ioredis routes both by the slot of the first key).
 */
export class LuaScript<S extends string> {
  /** The script's own file (header, include lines, body). */
  readonly source: string;
  /** The text sent to Redis: `source` with its includes inlined. */
  readonly lua: string;
  /** SHA-1 of `lua`, hex: the `EVALSHA` name. */
  readonly sha: string;
  private runs = 0;

  /** Use `defineScript`. */
  constructor(
    readonly name: string,
    /** Every `.lua` file of the script's folder (the script's own and its includes). */
    readonly sources: LuaSources,
    readonly numberOfKeys: number,
    readonly statuses: readonly S[],
  ) {
    this.lua = buildScriptText(name, sources);
    this.source = sources[name];
    this.sha = createHash('sha1').update(this.lua).digest('hex');
  }

  /** Calls of `run` in this process so far (one per script execution asked for, retries not counted). */
  get calls(): number {
    return this.runs;
  }

  /**
   * Runs the script once.
   * @param keys exactly `numberOfKeys` keys; all on one Cluster slot.
   * @throws the Redis error (connection lost, command timeout, a script error), or Error when the
   *   reply is not one of this script's status words followed by strings.
   */
  async run(client: RedisClient, keys: readonly string[], args: readonly (string | number)[]): Promise<ScriptReply<S>> {
    if (keys.length !== this.numberOfKeys)
      throw new Error(`script ${this.name} takes ${this.numberOfKeys} keys, got ${keys.length}`);
    this.runs++;
    let reply: unknown;
    try {
      reply = await client.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (e) {
      if (!(e instanceof Error) || !e.message.startsWith('NOSCRIPT')) throw e;
      reply = await client.eval(this.lua, keys.length, ...keys, ...args);
    }
    return decodeReply(this, reply);
  }
}

/**
 * Defines script `name` of `sources` (its file `<name>.lua`) with the status words it may answer.
 * @throws Error when a file or an include is missing, includes form a cycle, or `name` is already defined.
 */
export function defineScript<const S extends string>(
  name: string,
  sources: LuaSources,
  opts: { numberOfKeys: number; statuses: readonly S[] },
): LuaScript<S> {
  if (DEFINED.has(name)) throw new Error(`script ${name} is defined twice`);
  const script = new LuaScript(name, sources, opts.numberOfKeys, opts.statuses);
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
 * run): what each request costs in scripts, next to `INFO commandstats`, which counts every `EVALSHA` as one.
 */
export function scriptCallCounts(): Record<string, number> {
  return Object.fromEntries([...DEFINED].map(([name, script]) => [name, script.calls]));
}
