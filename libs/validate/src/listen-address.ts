/** A parsed `host:port` listen address (`gateway.listen`, `status.listen`, `--listen`). */
export interface ListenAddress {
  /** Host name or IP, without the brackets of an IPv6 literal. */
  host: string;
  /** 0–65535; 0 asks the OS for a free port. */
  port: number;
}

/**
 * Parses `host:port` (IPv6 in brackets: `[::1]:8080`), the format of every listen setting (README "Configuration").
 * @throws Error saying how to write it when the text is not host:port or the port is out of 0–65535.
 */
export function parseListenAddress(text: string): ListenAddress {
  const match = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(text);
  const port = match ? Number(match[2]) : NaN;
  if (!match || port > 65535)
    throw new Error(`"${text}" is not host:port with a port from 0 to 65535 (e.g. 127.0.0.1:8080)`);
  return { host: match[1].replace(/^\[|\]$/g, ''), port };
}

/**
 * True for a Redis URL (`queue.redis_url`, `REDIS_URL`, `--redis`): a `redis://` or `rediss://` URL
 * that a URL parser reads (a password holding `/`, `?` or `#` must be percent-encoded: `%2F`, `%3F`,
 * `%23`), or a Sentinel URL ({@link parseRedisSentinelUrl}).
 */
export function isRedisUrl(text: string): boolean {
  if (parseRedisSentinelUrl(text)) return true;
  if (!/^rediss?:\/\/[^\s]+$/.test(text)) return false;
  try {
    new URL(text);
    return true;
  } catch {
    return false;
  }
}

/** A Redis primary found through Sentinel (README "Redis requirements"): what a Sentinel URL names. */
export interface RedisSentinelUrl {
  /** The Sentinels to ask, in the URL's order. */
  readonly sentinels: readonly { readonly host: string; readonly port: number }[];
  /** The master name the Sentinels monitor (`sentinel monitor <name> …`). */
  readonly name: string;
  /** ACL user and password of the data nodes (not of the Sentinels), percent-decoded. */
  readonly username?: string;
  readonly password?: string;
}

/**
 * Reads `redis+sentinel://[user:password@]host[:port][,host[:port]...]/<master name>` (port 26379
 * when left out; an IPv6 host in brackets). The userinfo runs to the last `@`, percent-encoded where
 * it holds `%`. Pure.
 * @returns undefined for any other text, or a host, port or name it cannot read.
 */
export function parseRedisSentinelUrl(text: string): RedisSentinelUrl | undefined {
  const prefix = 'redis+sentinel://';
  if (!text.startsWith(prefix) || /\s/.test(text)) return undefined;
  const rest = text.slice(prefix.length);
  const at = rest.lastIndexOf('@');
  const [hosts, ...path] = rest.slice(at + 1).split('/');
  if (path.length !== 1 || path[0] === '') return undefined;
  try {
    const sentinels = hosts.split(',').map((entry) => {
      const m = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?$/.exec(entry);
      const port = Number(m?.[2] ?? 26379);
      if (!m || port < 1 || port > 65535) throw new Error(entry);
      return { host: m[1].replace(/^\[|\]$/g, ''), port };
    });
    const userinfo = at >= 0 ? rest.slice(0, at) : undefined;
    const colon = userinfo?.indexOf(':') ?? -1;
    const user = userinfo === undefined ? '' : decodeURIComponent(colon >= 0 ? userinfo.slice(0, colon) : userinfo);
    const password = userinfo !== undefined && colon >= 0 ? decodeURIComponent(userinfo.slice(colon + 1)) : '';
    return {
      sentinels,
      name: decodeURIComponent(path[0]),
      ...(user ? { username: user } : {}),
      ...(password ? { password } : {}),
    };
  } catch {
    return undefined;
  }
}

/**
 * A URL as it may be printed (logs, error text, `/status`): every credential it could carry is
 * replaced by `***` (README "Security"):
 * - the userinfo (`user:password@`), whatever the password holds: everything between `//` and the
 *   **last** `@` of the URL is taken as userinfo, so a password with `@`, `/`, `?` or `#` is hidden
 *   whole (a host never holds `@`; an `@` later in a path or query hides more, never less);
 * - the value of every query parameter (`?token=***`, `?password=***`);
 * - the fragment.
 * The rest is parsed with the WHATWG URL parser and printed from its parts (scheme, host, port,
 * path). Text that does not parse as a URL even then is printed as `<scheme>://***` (or `***`).
 * A Sentinel URL keeps its hosts and master name. Pure; never throws.
 */
export function redactUrl(url: string): string {
  const sentinel = parseRedisSentinelUrl(url);
  if (sentinel) {
    const hosts = sentinel.sentinels.map((s) => `${s.host.includes(':') ? `[${s.host}]` : s.host}:${s.port}`);
    const userinfo = url.lastIndexOf('@') >= 0 ? '***@' : '';
    return `redis+sentinel://${userinfo}${hosts.join(',')}/${encodeURIComponent(sentinel.name)}`;
  }
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(url);
  if (!scheme) return '***';
  let rest = url.slice(scheme[0].length);
  const at = rest.lastIndexOf('@');
  const hadUserinfo = at >= 0;
  if (hadUserinfo) rest = rest.slice(at + 1);
  let parsed: URL;
  try {
    // One non-special placeholder scheme: the host and port are kept as written (http would drop
    // a port 80), whatever the real scheme.
    parsed = new URL(`x-redacted://${rest}`);
  } catch {
    return `${scheme[1]}://***`;
  }
  if (parsed.username !== '' || parsed.password !== '') return `${scheme[1]}://***`;
  const query = [...parsed.searchParams.keys()].map((key) => `${encodeURIComponent(key)}=***`).join('&');
  return `${scheme[1]}://${hadUserinfo ? '***@' : ''}${parsed.host}${parsed.pathname}${query ? `?${query}` : ''}${parsed.hash ? '#***' : ''}`;
}
