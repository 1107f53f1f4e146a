import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import path from 'node:path';

/** The HAProxy config the fleet runs and the README shows (relative to the workspace root). */
export const HAPROXY_CONFIG = 'deploy/haproxy/haproxy.cfg';

const MISSING =
  'haproxy not found: install the Debian package haproxy (apt-get install -y haproxy) or set HAPROXY to its path';

/**
 * Path of the `haproxy` binary: `HAPROXY`, else the first on PATH, else Debian's /usr/sbin/haproxy
 * (not on a non-root user's PATH).
 * @throws Error naming the Debian package when there is none.
 */
export function findHaproxy(env: Record<string, string | undefined> = process.env): string {
  if (env['HAPROXY']) return env['HAPROXY'];
  const dirs = [...(env['PATH'] ?? '').split(path.delimiter).filter(Boolean), '/usr/sbin', '/usr/local/sbin'];
  for (const dir of dirs) {
    const candidate = path.join(dir, 'haproxy');
    if (existsSync(candidate)) return candidate;
  }
  throw new Error(MISSING);
}

/** One server line of HAProxy's stats CSV. */
export interface HaproxyServer {
  /** Backend name (`pxname`). */
  backend: string;
  /** Server name (`svname`), e.g. gw1. */
  server: string;
  /** `UP`, `DOWN`, `MAINT`, `UP 1/2` (going down), `DOWN 1/2` (coming up), `no check`. */
  status: string;
  /** Current sessions. */
  sessions: number;
  /** Connection retries and redispatches so far. */
  retries: number;
  redispatches: number;
}

/**
 * The servers of HAProxy's stats CSV (`GET <stats>/;csv`); BACKEND and FRONTEND rows are left out.
 * @throws Error when the stats page does not answer.
 */
export async function haproxyServers(statsUrl: string): Promise<HaproxyServer[]> {
  const res = await fetch(`${statsUrl.replace(/\/$/, '')}/;csv`, { signal: AbortSignal.timeout(2000) });
  if (!res.ok) throw new Error(`HAProxy stats answered ${res.status}`);
  const [header, ...rows] = (await res.text()).trim().split('\n');
  const names = header.replace(/^#\s*/, '').split(',');
  const col = (name: string) => names.indexOf(name);
  return rows
    .map((line) => line.split(','))
    .filter((cells) => cells[col('svname')] !== 'BACKEND' && cells[col('svname')] !== 'FRONTEND')
    .map((cells) => ({
      backend: cells[col('pxname')],
      server: cells[col('svname')],
      status: cells[col('status')],
      sessions: Number(cells[col('scur')] || 0),
      retries: Number(cells[col('wretr')] || 0),
      redispatches: Number(cells[col('wredis')] || 0),
    }));
}

/**
 * Sends one command to HAProxy's runtime API (`stats socket ... level admin`, a Unix socket) and
 * resolves to its answer, e.g. `set server gateways/gw1 state maint` (HAProxy management guide,
 * "Unix Socket commands").
 * @throws Error when the socket does not answer within `timeoutMs`, or the answer is an error.
 */
export function haproxyCommand(socket: string, command: string, timeoutMs = 2000): Promise<string> {
  return new Promise((resolve, reject) => {
    const conn = connect({ path: socket });
    let answer = '';
    const timer = setTimeout(
      () => conn.destroy(new Error(`HAProxy runtime API: no answer to "${command}"`)),
      timeoutMs,
    );
    conn.on('connect', () => conn.end(`${command}\n`));
    conn.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    conn.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    conn.on('close', () => {
      clearTimeout(timer);
      const text = answer.trim();
      if (/^(Unknown command|No such|Require|Invalid|Permission denied)/im.test(text))
        reject(new Error(`HAProxy runtime API: "${command}": ${text}`));
      else resolve(text);
    });
  });
}
