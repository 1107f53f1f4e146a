import type { Redis } from 'ioredis';

/**
 * Every command Redis counted since its last `CONFIG RESETSTAT` (`INFO commandstats`; a script's
 * inner commands are counted apart from its `FCALL` or `EVALSHA`), less `INFO` and `CONFIG` (the test's own
 * reads) and the commands named in `ignore`. For cost tests: run N requests after a RESETSTAT,
 * divide by N.
 */
export async function commandsSinceReset(admin: Redis, ignore: readonly string[] = []): Promise<number> {
  const skipped = new Set(['info', 'config', ...ignore]);
  const stats = await admin.info('commandstats');
  let total = 0;
  for (const [, name, calls] of stats.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) {
    if (!skipped.has(name)) total += Number(calls);
  }
  return total;
}

/**
 * The script calls (`FCALL`, `EVALSHA`, `EVAL` and their read-only forms) Redis counted since its last
 * `CONFIG RESETSTAT` (`INFO commandstats`): how many atomic steps a request cost, whatever each ran.
 */
export async function scriptCallsSinceReset(admin: Redis): Promise<number> {
  const scripts = new Set(['fcall', 'fcall_ro', 'evalsha', 'eval', 'evalsha_ro', 'eval_ro']);
  const stats = await admin.info('commandstats');
  let total = 0;
  for (const [, name, calls] of stats.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) {
    if (scripts.has(name)) total += Number(calls);
  }
  return total;
}
