import { Redis } from 'ioredis';
import { HEALTH_SCRIPTS } from '../health/scripts/health-scripts';
import { LEASE_SCRIPTS } from '../queue/scripts/lease-scripts';
import { startRedis, uniquePrefix, type TestRedis } from '../testing';
import { buildScriptText, decodeReply, scriptCallCounts, type LuaScript, type LuaSources } from './script-loader';

/** Every script of the lib: each must load into Redis and keep the header convention (docs/architecture.md, "Lua scripts"). */
const ALL_SCRIPTS: LuaScript<string>[] = [...Object.values(LEASE_SCRIPTS), ...Object.values(HEALTH_SCRIPTS)];

/** The `KEYS[…]` and `ARGV[…]` entries of the header (the first `--[[ … ]]` block), whitespace removed. */
function headerEntries(source: string): string[] {
  const header = /^--\[\[([\s\S]*?)\]\]/.exec(source)?.[1] ?? '';
  return [...header.matchAll(/^\s*((?:KEYS|ARGV)\[[^\]]+\])/gm)].map((m) => m[1].replace(/\s/g, ''));
}

/** Lua code without comments and string literals, so that only code is matched. */
function codeOnly(lua: string): string {
  return lua
    .replace(/--\[\[[\s\S]*?\]\]/g, '')
    .replace(/--.*$/gm, '')
    .replace(/'[^'\n]*'/g, "''");
}

/**
 * What the script's own code reads of KEYS and ARGV, in the header's notation: `ARGV[3]`,
 * `ARGV[6..5+n]` for `sliceArgs(ARGV, 6, 5 + n)`, `ARGV[4..]` for `groupArgs(ARGV, 4, 2)`, `KEYS[2..]`
 * for `sliceArgs(KEYS, 2)`. A use of
 * KEYS or ARGV in any other form (`#ARGV`, `ARGV[i]` in a loop) reads as itself and matches no header.
 */
function reads(source: string): string[] {
  const code = codeOnly(source).replace(/\s/g, '');
  const out = [...code.matchAll(/\b(?:KEYS|ARGV)\[[^\]]+\]/g)].map((m) => m[0]);
  for (const m of code.matchAll(/sliceArgs\((ARGV|KEYS),([^,)]+)(?:,([^)]+))?\)/g))
    out.push(`${m[1]}[${m[2]}..${m[3] ?? ''}]`);
  for (const m of code.matchAll(/groupArgs\(ARGV,([^,)]+),[^)]+\)/g)) out.push(`ARGV[${m[1]}..]`);
  const uses = code.match(/\b(?:KEYS|ARGV)\b/g)?.length ?? 0;
  const understood = out.length;
  return uses === understood ? out : [...out, `${uses - understood} other use(s) of KEYS/ARGV`];
}

/** Code lines of the script's own body, in order (header, comments, include lines and blank lines left out). */
function bodyLines(source: string): string[] {
  return codeOnly(source)
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
}

/** Names each include declares at its top level (`local function grant(`, `local rcall =`). */
function includeNames(sources: LuaSources): string[] {
  return Object.entries(sources)
    .filter(([path]) => path.startsWith('includes/'))
    .flatMap(([, text]) => [...text.matchAll(/^local (?:function )?(\w+)/gm)].map((m) => m[1]));
}

function shuffled(sources: LuaSources): LuaSources {
  return Object.fromEntries(Object.entries(sources).reverse());
}

describe.each(ALL_SCRIPTS.map((s) => [s.name, s] as const))('script %s', (_, script) => {
  it('lists in its header exactly the ARGV it reads, and every KEYS it reads', () => {
    const read = [...new Set(reads(script.source))].sort();
    const header = headerEntries(script.source).sort();
    expect(read.filter((e) => !e.startsWith('KEYS'))).toEqual(header.filter((e) => e.startsWith('ARGV')));
    expect(read.filter((e) => !header.includes(e))).toEqual([]);
  });

  it('lists KEYS[1..numberOfKeys] in its header, then KEYS[numberOfKeys+1..] when it takes more', () => {
    const keys = headerEntries(script.source).filter((e) => e.startsWith('KEYS'));
    const fixed = Array.from({ length: script.numberOfKeys }, (_, i) => `KEYS[${i + 1}]`);
    expect(keys).toEqual(script.variadicKeys ? [...fixed, `KEYS[${script.numberOfKeys + 1}..]`] : fixed);
  });

  it('reads KEYS and ARGV only into named locals at its top', () => {
    const lines = bodyLines(script.source);
    const firstStatement = lines.findIndex((l) => !l.startsWith('local '));
    const readingLines = lines.flatMap((l, i) => (/\b(?:KEYS|ARGV)\b/.test(l) ? [i] : []));
    expect(readingLines.length).toBeGreaterThan(0);
    for (const i of readingLines)
      expect({ line: lines[i], atTop: i < firstStatement }).toEqual({ line: lines[i], atTop: true });
  });

  it('declares every include function it uses before its first use', () => {
    const code = codeOnly(script.lua);
    for (const name of includeNames(script.sources)) {
      const declaration = new RegExp(`\\blocal (?:function )?${name}\\b`).exec(code);
      const declaredAt = declaration ? declaration.index + declaration[0].length - name.length : -1;
      const uses = [...code.matchAll(new RegExp(`\\b${name}\\b`, 'g'))]
        .map((m) => m.index)
        .filter((i) => i !== declaredAt);
      const declaredBeforeUse = uses.length === 0 || (declaredAt >= 0 && declaredAt < Math.min(...uses));
      expect({ name, declaredBeforeUse }).toEqual({ name, declaredBeforeUse: true });
    }
  });

  it('inlines each include once, and builds the same text whatever the order of its sources', () => {
    expect(buildScriptText(script.name, shuffled(script.sources))).toBe(script.lua);
    expect(script.lua).not.toMatch(/@include/);
    const declarations = [...codeOnly(script.lua).matchAll(/^local function (\w+)/gm)].map((m) => m[1]);
    expect(declarations).toEqual([...new Set(declarations)]);
  });
});

describe('include resolution', () => {
  const sources: LuaSources = {
    main: '--[[ main ]]\n--- @include "includes/b"\n--- @include "includes/a"\nreturn b() + a()\n',
    'includes/a': '--- @include "c"\nlocal function a() return c() end\n',
    'includes/b': '--- @include "a"\n--- @include "c"\nlocal function b() return a() + c() end\n',
    'includes/c': 'local function c() return 1 end\n',
  };

  it('inlines every include once, each after the includes it names, at the first include line', () => {
    expect(buildScriptText('main', sources)).toBe(
      '--[[ main ]]\n' +
        'local function c() return 1 end\n' +
        'local function a() return c() end\n' +
        'local function b() return a() + c() end\n' +
        'return b() + a()\n',
    );
  });

  it('names the chain of a missing include', () => {
    const { 'includes/c': _, ...missing } = sources;
    expect(() => buildScriptText('main', missing)).toThrow(
      'lua file includes/c.lua not found (main > includes/b > includes/a > includes/c)',
    );
  });

  it('refuses a cycle of includes', () => {
    const cyclic = { ...sources, 'includes/c': '--- @include "b"\nlocal function c() return 1 end\n' };
    expect(() => buildScriptText('main', cyclic)).toThrow(
      'lua include cycle: main > includes/b > includes/a > includes/c > includes/b',
    );
  });
});

describe('decodeReply', () => {
  const script = { name: 'fixture', statuses: ['granted', 'full'] as const };

  it.each([
    [['granted', 'provider.a'], { status: 'granted', values: ['provider.a'] }],
    [['full'], { status: 'full', values: [] }],
  ])('decodes %j', (reply, decoded) => {
    expect(decodeReply(script, reply)).toEqual(decoded);
  });

  it.each([[['queued', 'provider.a']], [[1, 'x']], [[]], [7], [null]])('refuses %j', (reply) => {
    expect(() => decodeReply(script, reply)).toThrow('script fixture answered');
  });
});

describe('in a real Redis', () => {
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

  it.each(ALL_SCRIPTS.map((s) => [s.name, s] as const))(
    'loads %s under the sha the loader computed',
    async (_, script) => {
      expect(await client.script('LOAD', script.lua)).toBe(script.sha);
    },
  );

  it.each(ALL_SCRIPTS.map((s) => [s.name, s] as const))(
    'loads the Redis Functions library of %s under its function name',
    async (_, script) => {
      expect(await client.function('LOAD', 'REPLACE', script.library)).toBe(script.functionName);
    },
  );

  it('runs a script by FCALL, counting each run once', async () => {
    const script = LEASE_SCRIPTS.leave;
    const base = `${uniquePrefix('lua')}:{t}`;
    const before = scriptCallCounts()[script.name];
    const fcalls = async () => Number(/cmdstat_fcall:calls=(\d+)/.exec(await client.info('commandstats'))?.[1] ?? 0);
    const sent = await fcalls();
    for (const id of ['r1.1', 'r1.2'])
      expect(await script.run(client, [`${base}:seq`], [base, 'provider.a', id])).toEqual({
        status: 'gone',
        values: [],
      });
    expect(await fcalls()).toBe(sent + 2);
    expect(scriptCallCounts()[script.name]).toBe(before + 2);
  });

  it('writes a health record with compare-and-set and answers a conflict with the current record', async () => {
    const key = `${uniquePrefix('lua')}:{health}:p`;
    const cas = HEALTH_SCRIPTS.compareAndSet;
    expect(await cas.run(client, [key], ['0', '{"state":"healthy"}', 'healthy', 10_000])).toEqual({
      status: 'written',
      values: ['1'],
    });
    expect(await cas.run(client, [key], ['0', '{}', 'healthy', 10_000])).toEqual({
      status: 'conflict',
      values: ['1', '{"state":"healthy"}'],
    });
  });

  it('refuses a call with the wrong number of keys before sending it', async () => {
    await expect(LEASE_SCRIPTS.admit.run(client, [], ['x'])).rejects.toThrow('script admit takes 1 keys, got 0');
  });
});
