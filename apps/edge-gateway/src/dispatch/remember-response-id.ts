import type { UpstreamResponse } from '../adapters/adapter';
import { watchChunks } from './watch-chunks';

const RESPONSE_ID = /"id"\s*:\s*"(resp[_-][^"]+)"/;

/**
 * Watches an upstream Responses answer for its id (the JSON body, or the first SSE events up to
 * `response.created`, at most 16 KiB of them) and reports it once, without changing a byte of what
 * the client gets: the write side of the affinity {@link preferAffinity} reads (README "Affinity").
 */
export function rememberResponseId(upstream: UpstreamResponse, remember: (id: string) => void): UpstreamResponse {
  if (upstream.kind === 'json') {
    const text = typeof upstream.body === 'string' ? upstream.body : Buffer.from(upstream.body).toString('utf8');
    const id = RESPONSE_ID.exec(text)?.[1];
    if (id) remember(id);
    return upstream;
  }
  let seen = '';
  let found = false;
  return watchChunks(upstream, (chunk) => {
    if (found || seen.length >= 16_384) return;
    seen += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    const id = RESPONSE_ID.exec(seen)?.[1];
    if (id) {
      found = true;
      remember(id);
    }
  });
}
