import { redactUrl, type HttpAdapterConfig } from '@iop/validate';
import { MIN_SECRET_CHARS, queryValues, secretForms, textRedactor } from './upstream-redaction';

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
   * `text` as a client may read it (README "Security", "Errors"): an upstream's error text is passed
   * to clients, and an upstream may quote the request it got. Every secret the gateway sends this
   * upstream becomes `***`: the credential of its `Authorization` header (the `api_key`; the Basic
   * base64 of `user:password`, and `user:password` itself), the password of `base_url` and the values
   * of its query string, each in every form of `secretForms` (percent-encoded, JSON-escaped, any
   * case). Where the upstream is becomes `[adapter <id>]`: `base_url` as written, its origin, its
   * `host:port` and its host name (unless a single label such as `vllm`, which any text may hold).
   */
  redactForClient(text: string): string;
}

/** Parses `config.base_url` per {@link UpstreamTarget}. @throws TypeError on a URL `validate` would refuse. */
export function upstreamTarget(
  config: Pick<HttpAdapterConfig, 'id' | 'type' | 'base_url' | 'api_key'>,
): UpstreamTarget {
  const url = new URL(config.base_url);
  let basePath = url.pathname.replace(/\/+$/, '');
  if (basePath === '' || (config.type === 'ollama' && !basePath.endsWith('/v1'))) basePath += '/v1';
  let authorization: string | undefined;
  if (config.api_key) authorization = `Bearer ${config.api_key}`;
  else if (url.username || url.password) authorization = `Basic ${base64(userinfoOf(url).decoded)}`;
  const loggedUrls = new Map<string, string>();
  return {
    origin: url.origin,
    basePath,
    query: url.search,
    rootPath: basePath.replace(/\/v1$/, ''),
    authorization,
    forLog: redactUrl(config.base_url),
    // Built once per path: every call names its URL for the log, few paths are ever asked for.
    logUrl: (path) => {
      let logged = loggedUrls.get(path);
      if (logged === undefined) {
        const full = new URL(config.base_url);
        full.pathname = basePath + path;
        logged = redactUrl(full.toString());
        loggedUrls.set(path, logged);
      }
      return logged;
    },
    redactForClient: textRedactor(clientRedactions(config, url, basePath)),
  };
}

const base64 = (text: string) => Buffer.from(text).toString('base64');

/** A percent-encoded part of a URL, decoded; as it is when it is not valid percent-encoding. */
function decoded(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

/** `user:password` of `url`, decoded (as Basic auth sends it) and as written. */
const userinfoOf = (url: URL) => ({
  decoded: `${decoded(url.username)}:${decoded(url.password)}`,
  asWritten: `${url.username}:${url.password}`,
});

/** What {@link UpstreamTarget.redactForClient} replaces, and by what. */
function clientRedactions(
  config: Pick<HttpAdapterConfig, 'id' | 'api_key'> & { base_url: string },
  url: URL,
  basePath: string,
): Map<string, string> {
  const out = new Map<string, string>();
  const secret = (value: string | undefined, asWritten?: string) => {
    if (value === undefined || value.length < MIN_SECRET_CHARS) return;
    for (const form of secretForms(value, asWritten)) out.set(form, '***');
  };
  secret(config.api_key);
  if (url.username || url.password) {
    const userinfo = userinfoOf(url);
    secret(userinfo.decoded, userinfo.asWritten);
    const credential = base64(userinfo.decoded);
    secret(credential);
    secret(credential.replace(/=+$/, ''));
    secret(Buffer.from(userinfo.decoded).toString('base64url'));
    secret(decoded(url.password), url.password);
  }
  for (const value of queryValues(url.search)) secret(value.decoded, value.asWritten);
  const label = `[adapter ${config.id}]`;
  const places = [config.base_url, url.origin + basePath, url.origin, url.host];
  // A single-label host name (`vllm`) may be any word of a text: only with its port (`vllm:8000`).
  if (/[.:]/.test(url.hostname)) places.push(url.hostname);
  for (const place of places) for (const form of secretForms(place)) if (!out.has(form)) out.set(form, label);
  return out;
}
