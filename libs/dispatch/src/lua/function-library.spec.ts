import type { ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { LEASE_SCRIPTS } from '../queue/scripts/lease-scripts';
import { freePort, spawnRedis, startRedis, uniquePrefix, type TestRedis } from '../testing';
import { LuaScript, type LuaSources } from './script-loader';

/** Calls of `name` in `INFO commandstats` (`function|load` for a subcommand), 0 when none. */
async function calls(client: Redis, name: string): Promise<number> {
  const stats = await client.info('commandstats');
  return Number(new RegExp(`^cmdstat_${name.replace('|', '\\|')}:calls=(\\d+)`, 'm').exec(stats)?.[1] ?? 0);
}

/** A script of its own (not registered with `defineScript`): answers `{'seen', n}`, `n` its key's new count. */
function counter(comment: string, allowOom = false): LuaScript<'seen'> {
  const sources: LuaSources = {
    count: `--[[ ${comment} ]]\n--- @include "includes/rcall"\nlocal key = KEYS[1]\nreturn {'seen', tostring(rcall('INCR', key))}\n`,
    'includes/rcall': 'local rcall = redis.call\n',
  };
  return new LuaScript('count', sources, { numberOfKeys: 1, statuses: ['seen'], allowOom });
}

describe('scripts as Redis Functions (docs/architecture.md, "Lua scripts")', () => {
  let redis: TestRedis;
  let client: Redis;
  beforeAll(async () => {
    redis = await startRedis({ forceOwn: true });
    client = new Redis(redis.url);
  });
  afterAll(async () => {
    client.disconnect();
    await redis.stop();
  });
  beforeEach(async () => {
    await client.function('FLUSH');
    await client.config('SET', 'maxmemory', '0');
    await client.config('RESETSTAT');
  });

  it('loads the library once on the first calls, however many found it missing, then calls it by name', async () => {
    const script = counter('first calls');
    const key = `${uniquePrefix('fn')}:n`;
    const first = await Promise.all(Array.from({ length: 20 }, () => script.run(client, [key], [])));
    expect(first.map((r) => Number(r.values[0])).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 20 }, (_, i) => i + 1),
    );
    expect(await calls(client, 'function|load')).toBe(1);
    const fcalls = await calls(client, 'fcall');
    expect(await script.run(client, [key], [])).toEqual({ status: 'seen', values: ['21'] });
    expect(await calls(client, 'fcall')).toBe(fcalls + 1);
    expect(await calls(client, 'function|load')).toBe(1);
    expect(await calls(client, 'evalsha')).toBe(0);
  });

  it('loads it again after FUNCTION FLUSH (or a restart of a Redis without persistence)', async () => {
    const script = counter('flush');
    const key = `${uniquePrefix('fn')}:n`;
    await script.run(client, [key], []);
    await client.function('FLUSH');
    expect(await script.run(client, [key], [])).toEqual({ status: 'seen', values: ['2'] });
    expect(await calls(client, 'function|load')).toBe(2);
  });

  it('keeps two versions of a script side by side, as replicas of two releases run them in a rolling upgrade', async () => {
    const older = counter('version 1');
    const newer = counter('version 2');
    expect(newer.functionName).not.toBe(older.functionName);
    const key = `${uniquePrefix('fn')}:n`;
    await older.run(client, [key], []);
    await newer.run(client, [key], []);
    expect(await older.run(client, [key], [])).toEqual({ status: 'seen', values: ['3'] });
    const names = ((await client.function('LIST')) as unknown[][]).map((lib) => lib[1]);
    expect(names.sort()).toEqual([older.functionName, newer.functionName].sort());
  });

  it('runs a script that ends state while Redis is over maxmemory, and refuses one that adds state', async () => {
    const ends = counter('allow-oom', true);
    const adds = counter('refused when out of memory');
    const key = `${uniquePrefix('fn')}:n`;
    await ends.run(client, [key], []);
    await adds.run(client, [key], []);
    await client.config('SET', 'maxmemory-policy', 'noeviction');
    await client.config('SET', 'maxmemory', '1');
    await expect(adds.run(client, [key], [])).rejects.toThrow(/^OOM /);
    expect(await ends.run(client, [key], [])).toEqual({ status: 'seen', values: ['3'] });
    await client.config('SET', 'maxmemory', '0');
    // The lease scripts: admission adds state, release ends it.
    expect(LEASE_SCRIPTS.admit.library).not.toContain('allow-oom');
    expect(LEASE_SCRIPTS.release.library).toContain(`flags = {'allow-oom'}`);
  });

  it('runs a script that ends state over maxmemory even when its library was never loaded (by EVAL of its flagged text)', async () => {
    const ends = counter('allow-oom, first call over maxmemory', true);
    const adds = counter('not loaded, refused when out of memory');
    const key = `${uniquePrefix('fn')}:n`;
    await client.config('SET', 'maxmemory-policy', 'noeviction');
    await client.config('SET', 'maxmemory', '1');
    await expect(adds.run(client, [key], [])).rejects.toThrow(/^OOM /);
    expect(await ends.run(client, [key], [])).toEqual({ status: 'seen', values: ['1'] });
    expect(await ends.run(client, [key], [])).toEqual({ status: 'seen', values: ['2'] });
    expect(await calls(client, 'eval')).toBe(1);
    expect(await calls(client, 'evalsha')).toBe(2);
    await client.config('SET', 'maxmemory', '0');
    // Below maxmemory again, it is loaded and called as a function.
    expect(await ends.run(client, [key], [])).toEqual({ status: 'seen', values: ['3'] });
    expect(await calls(client, 'function|load')).toBe(1);
  });

  /** Runs `test` with a connection as a fresh ACL user of `rules` (beside `+@all` on every key and channel). */
  async function asUser(name: string, rules: string[], test: (limited: Redis) => Promise<void>): Promise<void> {
    const user = `${name}${process.pid}`;
    await client.acl('SETUSER', user, 'on', 'nopass', '~*', '&*', '+@all', ...rules);
    const limited = new Redis(redis.url, { username: user });
    try {
      await test(limited);
    } finally {
      limited.disconnect();
      await client.acl('DELUSER', user);
    }
  }

  it('answers with EVALSHA for an ACL user that may not use Functions', () =>
    asUser('evalonly', ['-fcall', '-fcall_ro', '-function'], async (limited) => {
      const script = counter('acl');
      const key = `${uniquePrefix('fn')}:n`;
      expect(await script.run(limited, [key], [])).toEqual({ status: 'seen', values: ['1'] });
      expect(await script.run(limited, [key], [])).toEqual({ status: 'seen', values: ['2'] });
      expect(await calls(client, 'evalsha')).toBe(2);
      expect(await calls(client, 'eval')).toBe(1);
      expect(await calls(client, 'fcall')).toBe(0);
      // Over maxmemory the flags hold as in the library: a script that ends state runs, one that adds it is refused.
      const ends = counter('acl, allow-oom', true);
      await ends.run(limited, [key], []);
      await client.config('SET', 'maxmemory-policy', 'noeviction');
      await client.config('SET', 'maxmemory', '1');
      try {
        await expect(script.run(limited, [key], [])).rejects.toThrow(/^OOM /);
        expect(await ends.run(limited, [key], [])).toEqual({ status: 'seen', values: ['4'] });
      } finally {
        await client.config('SET', 'maxmemory', '0');
      }
    }));

  it('answers with EVALSHA for an ACL user that may call functions but not load them', () =>
    asUser('noload', ['-function'], async (limited) => {
      const script = counter('acl without FUNCTION LOAD');
      const key = `${uniquePrefix('fn')}:n`;
      expect(await script.run(limited, [key], [])).toEqual({ status: 'seen', values: ['1'] });
      expect(await script.run(limited, [key], [])).toEqual({ status: 'seen', values: ['2'] });
      expect(await calls(client, 'fcall')).toBe(1);
      expect(await calls(client, 'evalsha')).toBe(2);
    }));
});

describe('on a Redis without Functions (FCALL unknown, as before Redis 7.0)', () => {
  let child: ChildProcess;
  let client: Redis;
  beforeAll(async () => {
    const port = await freePort();
    child = await spawnRedis(port, ['--rename-command', 'FCALL', '']);
    client = new Redis(port, '127.0.0.1');
  });
  afterAll(async () => {
    client.disconnect();
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  });

  it('runs every lease script by EVALSHA after the first refusal', async () => {
    const base = `${uniquePrefix('fn')}:{t}`;
    expect(await LEASE_SCRIPTS.leave.run(client, [`${base}:seq`], [base, 'provider.a', 'r1.1'])).toEqual({
      status: 'gone',
      values: [],
    });
    expect(await LEASE_SCRIPTS.leave.run(client, [`${base}:seq`], [base, 'provider.a', 'r1.2'])).toEqual({
      status: 'gone',
      values: [],
    });
    const stats = await client.info('commandstats');
    expect(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1]).toBe('2');
    expect(stats).not.toMatch(/cmdstat_function/);
  });
});
