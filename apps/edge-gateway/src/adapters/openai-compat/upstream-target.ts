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
  return {
    origin: url.origin,
    basePath,
    query: url.search,
    rootPath: basePath.replace(/\/v1$/, ''),
    authorization,
    forLog: redactUrl(config.base_url),
  };
}
