import { masterNodes, type RedisClient } from '../queue/redis-connection';

/**
 * A script split where its includes go (docs/architecture.md, "Lua scripts"): `head` is the text
 * before its first include line (its header comment), `includes` every include inlined once in
 * dependency order, `body` the rest of its own file (the code that runs per call). `head + includes
 * + body` is the text `EVAL` runs.
 */
export interface ScriptParts {
  readonly head: string;
  readonly includes: string;
  readonly body: string;
}

/**
 * The Redis Functions library of one script (Redis "Functions" documentation, `FUNCTION LOAD`): one
 * function, `name`, that runs the script's body with its keys and arguments as `KEYS` and `ARGV`.
 * The includes run once per Redis server, at the function's first call (a library's own load may
 * not call Redis, and includes such as `rcall` take `redis.call`), and the local functions they
 * define are kept in the function's upvalues from then on, so a call no longer re-creates them as
 * every `EVAL` of the whole text does (docs/architecture.md, "Lua scripts").
 * @param name library and function name, `[A-Za-z0-9_]` only, unique to this text (it holds its hash).
 * @param allowOom Redis flag `allow-oom`: the function runs while Redis is over `maxmemory`.
 */
export function functionLibraryText(name: string, parts: ScriptParts, allowOom: boolean): string {
  const flags = allowOom ? `'allow-oom'` : '';
  return `#!lua name=${name}
${parts.head.trim()}
local run
redis.register_function{function_name = '${name}', flags = {${flags}}, callback = function(keys, args)
if run == nil then
run = (function()
${parts.includes}
return function(KEYS, ARGV)
${parts.body.trim()}
end
end)()
end
return run(keys, args)
end}
`;
}

/**
 * How a client whose Redis refused Functions runs scripts: `eval` on a Redis before 7.0 (plain
 * `EVALSHA`, whose text may carry no flags), `eval-flags` for an ACL user without `FCALL` or
 * `FUNCTION` on Redis 7.0 or later (`EVALSHA` of texts that carry the same flags as the library, such
 * as `allow-oom`, in a `#!lua` line: Redis "Script flags" documentation).
 */
export type EvalMode = 'eval' | 'eval-flags';

/** Clients whose Redis refused Functions, and how they run scripts instead. */
const WITHOUT_FUNCTIONS = new WeakMap<RedisClient, EvalMode>();

/** How `client` runs scripts once its Redis refused `FCALL` or `FUNCTION LOAD`; undefined while it runs Functions. */
export function evalModeOf(client: RedisClient): EvalMode | undefined {
  return WITHOUT_FUNCTIONS.get(client);
}

/**
 * Marks `client` as one whose scripts run with `EVALSHA` when `e` says its Redis has no Functions
 * (Redis before 7.0: `ERR unknown command`, mode `eval`) or its ACL user may not use them (`NOPERM`
 * naming `fcall` or `function|load`, mode `eval-flags`).
 * @returns true when `e` was such an error (and the client is marked), else false.
 */
export function refusesFunctions(client: RedisClient, e: unknown): boolean {
  if (!(e instanceof Error)) return false;
  if (/^ERR unknown command/.test(e.message)) WITHOUT_FUNCTIONS.set(client, 'eval');
  // The ACL refuses FCALL or FUNCTION LOAD themselves (a NOPERM of a command a script runs is that script's error).
  else if (/^NOPERM.*'(?:fcall|function\|load)'/i.test(e.message)) WITHOUT_FUNCTIONS.set(client, 'eval-flags');
  else return false;
  return true;
}

/** True when `e` is Redis's answer to `FCALL` of a function it does not hold (first call, a restart, `FUNCTION FLUSH`). */
export function isFunctionMissing(e: unknown): boolean {
  return e instanceof Error && /^ERR Function not found/i.test(e.message);
}

/**
 * Loads a library into `client`'s Redis: the one server, or every master of a Cluster (a
 * function's call goes to the master of its key's slot). `REPLACE`, so that replicas loading the
 * same library at once both succeed; a library's name holds its text's hash, so it never replaces
 * another version's.
 * @throws the Redis error of a master that refused it.
 */
export async function loadLibrary(client: RedisClient, text: string): Promise<void> {
  await Promise.all(masterNodes(client).map((node) => node.call('FUNCTION', 'LOAD', 'REPLACE', text)));
}
