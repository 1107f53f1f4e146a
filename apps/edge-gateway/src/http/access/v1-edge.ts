import type { GatewaySettings } from '@iop/validate';
import { ApiError } from '../../errors';
import type { GatewayHandler, GatewayResponse } from '../gateway-handler';

/** Response headers that name the node and provider that served (README "Security": `gateway.topology_headers`). */
export const TOPOLOGY_HEADERS: ReadonlySet<string> = new Set(['x-iop-node', 'x-iop-resource']);

/** Headers a browser page of an allowed origin may read from an answer. */
const EXPOSED_HEADERS = 'retry-after, x-request-id, x-iop-queue-wait-ms, x-iop-node, x-iop-resource';
/** Request headers allowed by a preflight when the browser names none it wants. */
const DEFAULT_ALLOWED_HEADERS = 'authorization, content-type';
/** How long a browser may cache a preflight answer, in seconds. */
const PREFLIGHT_MAX_AGE_S = 600;
/** A comma-separated list of header names, as `Access-Control-Request-Headers` carries it. */
const HEADER_LIST = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+(\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*$/;

export const originNotAllowed = () => new ApiError({ code: 'origin_not_allowed' });

/**
 * What every `/v1` request passes first (README "Security"):
 * - **CORS**: a request whose `Origin` is in `gateway.cors.allowed_origins` gets
 *   `Access-Control-Allow-Origin` (that origin) and the headers a page may read; its preflight
 *   (`OPTIONS` with `Access-Control-Request-Method`) is answered `204` with the methods (`GET`,
 *   `POST`) and the headers it asked for. A preflight from any other origin is a `403
 *   origin_not_allowed`, and other requests from it get no CORS header, so a browser lets no page
 *   of another origin read an answer or send a JSON body. Requests without `Origin` (every
 *   non-browser client) are untouched.
 * - **Topology headers**: with `gateway.topology_headers: false`, `x-iop-node` and
 *   `x-iop-resource` are never set on the answer.
 * Settings are read per request, so a config refresh applies at once.
 */
export function v1Edge(gateway: () => Pick<GatewaySettings, 'cors' | 'topology_headers'>): GatewayHandler {
  return (req, res, next) => {
    const settings = gateway();
    if (!settings.topology_headers) hideTopology(res);
    const origin = req.headers.origin;
    if (origin === undefined) return next();
    varyOnOrigin(res);
    const allowed = settings.cors.allowed_origins.includes(origin);
    const preflight = req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined;
    if (!allowed) return next(preflight ? originNotAllowed() : undefined);
    res.setHeader('access-control-allow-origin', origin);
    if (!preflight) {
      res.setHeader('access-control-expose-headers', EXPOSED_HEADERS);
      return next();
    }
    const asked = req.headers['access-control-request-headers'];
    res.setHeader('access-control-allow-methods', 'GET, POST');
    res.setHeader(
      'access-control-allow-headers',
      typeof asked === 'string' && HEADER_LIST.test(asked) ? asked : DEFAULT_ALLOWED_HEADERS,
    );
    res.setHeader('access-control-max-age', String(PREFLIGHT_MAX_AGE_S));
    res.statusCode = 204;
    res.end();
  };
}

/** Makes `res` ignore the topology headers, whoever sets them later. */
function hideTopology(res: GatewayResponse): void {
  const setHeader = res.setHeader.bind(res);
  res.setHeader = ((name: string, value: number | string | readonly string[]) =>
    TOPOLOGY_HEADERS.has(name.toLowerCase()) ? res : setHeader(name, value)) as GatewayResponse['setHeader'];
}

/** Adds `Origin` to the answer's `Vary` header (RFC 9110, section 12.5.5), keeping what is there already. */
function varyOnOrigin(res: GatewayResponse): void {
  const vary = res.getHeader('vary');
  const current = Array.isArray(vary) ? vary.join(', ') : vary === undefined ? '' : String(vary);
  if (current === '') return void res.setHeader('vary', 'Origin');
  if (current.trim() === '*' || current.split(',').some((name) => name.trim().toLowerCase() === 'origin')) return;
  res.setHeader('vary', `${current}, Origin`);
}
