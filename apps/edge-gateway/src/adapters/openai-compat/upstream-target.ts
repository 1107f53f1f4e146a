import { redactUrl, type HttpAdapterConfig } from '@iop/validate';

/**
 * Where an HTTP adapter sends requests, from `base_url` (README "Adapters"):
 * - the OpenAI base path: the URL's path as written, or `/v1` when it has none (`http://host:8000`
 *   as vLLM's docs write a server address); `ollama` always gets the `/v1` suffix;
 * - userinfo (`http://user:pass@host/v1`) is sent as HTTP Basic auth and never in the URL (an
 *   `api_key`, sent as a bearer token, wins over it);
 * - a query string (`?api-version=…`) is sent with every request.
 */
export interface UpstreamTarget {
  /** `http://host:port`, no userinfo. */
  origin: string;
  /** The OpenAI base path, e.g. `/v1`, `/openai/v1`; never ends with `/`. */
  basePath: string;
  /** `?a=b` or ''. */
  query: string;
  /** The server root's path (`basePath` without a final `/v1`), for health probes. */
  rootPath: string;
  /** `Authorization` header value, if any. */
  authorization?: string;
  /** `base_url` with any password redacted, for the log only. */
  forLog: string;
  /**
   * The URL a request to `path` goes to (the base path, then `path`, then the query string),
   * redacted like {@link forLog}, for the log only: e.g. `http://***@host/v1/chat/completions?api-version=***`.
   */
  logUrl(path: string): string;
  /**
   * `text` with every secret the gateway sends this upstream (its `api_key`, the password of
   * `base_url`, the values of its query string) replaced by `***`: an upstream's error text is passed
   * to clients and logs (README "Errors"), and an upstream may quote the request it got.
   */
  redactSecrets(text: string): string;
}

/** Parses `config.base_url` per {@link UpstreamTarget}. @throws TypeError on a URL `validate` would refuse. */
export function upstreamTarget(config: Pick<HttpAdapterConfig, 'type' | 'base_url' | 'api_key'>): UpstreamTarget {
  const url = new URL(config.base_url);
  let basePath = url.pathname.replace(/\/+$/, '');
  if (basePath === '' || (config.type === 'ollama' && !basePath.endsWith('/v1'))) basePath += '/v1';
  let authorization: string | undefined;
  if (config.api_key) authorization = `Bearer ${config.api_key}`;
  else if (url.username || url.password) {
    const user = decodeURIComponent(url.username);
    const password = decodeURIComponent(url.password);
    authorization = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
  }
  // Longest first, so a secret that contains another is replaced whole; very short values are not secrets.
  const secrets = [config.api_key, decodeURIComponent(url.password), ...url.searchParams.values()]
    .filter((v): v is string => v !== undefined && v.length >= 4)
    .sort((a, b) => b.length - a.length);
  return {
    origin: url.origin,
    basePath,
    query: url.search,
    rootPath: basePath.replace(/\/v1$/, ''),
    authorization,
    forLog: redactUrl(config.base_url),
    logUrl: (path) => {
      const full = new URL(config.base_url);
      full.pathname = basePath + path;
      return redactUrl(full.toString());
    },
    redactSecrets: (text) => secrets.reduce((out, secret) => out.split(secret).join('***'), text),
  };
}
