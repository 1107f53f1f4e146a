import { Redis } from 'ioredis';

/**
 * What Redis itself counted, read from `INFO commandstats` and `INFO cpu`. `commandstats` counts
 * every command a Lua script runs under its own name as well as the `FCALL` (or `EVALSHA`) that ran the script,
 * so a sum over the table is the number of commands Redis executed, nested ones included.
 */

/** One command's counters, summed since start-up or the last `CONFIG RESETSTAT`. */
export interface CommandCounter {
  calls: number;
  /** Microseconds Redis spent in the command (for `FCALL` or `EVALSHA`: the whole script, inner commands included). */
  usec: number;
}

/** Counters of one moment. */
export interface RedisSnapshot {
  /** By lower-case command name; subcommands as Redis names them (`client|list`, `config|resetstat`). */
  commands: Map<string, CommandCounter>;
  /** `used_cpu_sys + used_cpu_user` of the redis-server process, seconds. */
  cpuS: number;
}

/** What happened between two snapshots. */
export interface RedisDelta {
  /** Commands by name, calls > 0 only, the most called first. */
  commands: Array<{ command: string; calls: number; usec: number }>;
  /** Sum of `calls` over `commands`. */
  totalCalls: number;
  /** Redis CPU (sys + user) between the snapshots, ms. */
  cpuMs: number;
}

/** Parses `INFO commandstats` (`cmdstat_<name>:calls=N,usec=N,…` lines; other lines are ignored). */
export function parseCommandStats(info: string): Map<string, CommandCounter> {
  const out = new Map<string, CommandCounter>();
  for (const match of info.matchAll(/^cmdstat_([^:\s]+):(.*)$/gm)) {
    const fields = new Map(
      match[2]
        .trim()
        .split(',')
        .map((kv) => kv.split('=') as [string, string]),
    );
    const calls = Number(fields.get('calls'));
    const usec = Number(fields.get('usec'));
    if (Number.isFinite(calls)) out.set(match[1].toLowerCase(), { calls, usec: Number.isFinite(usec) ? usec : 0 });
  }
  return out;
}

/** `used_cpu_sys + used_cpu_user` from `INFO cpu`, seconds. @throws Error when either is missing. */
export function parseCpuSeconds(info: string): number {
  const field = (name: string) => {
    const match = new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info);
    if (!match) throw new Error(`INFO cpu has no ${name}`);
    return Number(match[1]);
  };
  return field('used_cpu_sys') + field('used_cpu_user');
}

/**
 * `after − before`, leaving out `ownInfoCalls` INFO calls (the reader's own). Counters that went
 * down (a `CONFIG RESETSTAT` in between) count from zero.
 */
export function diffSnapshots(before: RedisSnapshot, after: RedisSnapshot, ownInfoCalls: number): RedisDelta {
  const commands: RedisDelta['commands'] = [];
  for (const [command, now] of after.commands) {
    const then = before.commands.get(command) ?? { calls: 0, usec: 0 };
    const reset = now.calls < then.calls;
    let calls = reset ? now.calls : now.calls - then.calls;
    const usec = reset ? now.usec : now.usec - then.usec;
    if (command === 'info') calls = Math.max(0, calls - ownInfoCalls);
    if (calls > 0) commands.push({ command, calls, usec: Math.max(0, usec) });
  }
  commands.sort((a, b) => b.calls - a.calls || a.command.localeCompare(b.command));
  return { commands, totalCalls: commands.reduce((n, c) => n + c.calls, 0), cpuMs: (after.cpuS - before.cpuS) * 1000 };
}

/**
 * Reads the counters of one redis-server over its own connection. Each `snapshot()` issues two
 * `INFO` calls, which `delta()` leaves out again, so the figures are the gateways' commands only.
 */
export class RedisStatsReader {
  private readonly client: Redis;

  constructor(url: string) {
    this.client = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: true, connectionName: 'iop-bench-stats' });
    this.client.on('error', () => undefined);
  }

  async connect(): Promise<void> {
    await this.client.connect();
  }

  /** `redis_version` of the server. */
  async version(): Promise<string> {
    return /redis_version:(\S+)/.exec(await this.client.info('server'))?.[1] ?? 'unknown';
  }

  async snapshot(): Promise<RedisSnapshot> {
    const commands = parseCommandStats(await this.client.info('commandstats'));
    const cpuS = parseCpuSeconds(await this.client.info('cpu'));
    return { commands, cpuS };
  }

  /** `after − before` without the two INFO calls of each snapshot in between. */
  delta(before: RedisSnapshot, after: RedisSnapshot): RedisDelta {
    return diffSnapshots(before, after, 2);
  }

  close(): void {
    this.client.disconnect();
  }
}
