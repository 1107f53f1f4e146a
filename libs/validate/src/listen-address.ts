/** A parsed `host:port` listen address (`gateway.listen`, `status.listen`, `--listen`). */
export interface ListenAddress {
  /** Host name or IP, without the brackets of an IPv6 literal. */
  host: string;
  /** 0–65535; 0 asks the OS for a free port. */
  port: number;
}

/**
 * Parses `host:port` (IPv6 in brackets: `[::1]:8080`), the format of every listen setting (DESIGN §3).
 * @throws Error saying how to write it when the text is not host:port or the port is out of 0–65535.
 */
export function parseListenAddress(text: string): ListenAddress {
  const match = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(text);
  const port = match ? Number(match[2]) : NaN;
  if (!match || port > 65535) throw new Error(`"${text}" is not host:port with a port from 0 to 65535 (e.g. 127.0.0.1:8080)`);
  return { host: match[1].replace(/^\[|\]$/g, ''), port };
}

/** True for a `redis://` or `rediss://` URL (`queue.redis_url`, `REDIS_URL`, `--redis`). */
export function isRedisUrl(text: string): boolean {
  return /^rediss?:\/\/[^\s]+$/.test(text);
}

/** `redis://user:pass@host` → `redis://***@host`: credentials never reach logs or error text (DESIGN §3). */
export function redactUrl(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//***@');
}
