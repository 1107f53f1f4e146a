import type { QueueClient } from '@iop/dispatch';
import { ClientKeys, KeySet, presentedKey, type ClientSettings, type FlowClient } from '@iop/validate';
import type { GatewayHandler } from '../gateway-handler';
import { ApiError, invalidApiKey } from '../../errors';
import { PRIORITY_HEADER, requestClient } from '../request/priority-header';

/** Keeps one {@link KeySet} per configured list, rebuilt when a config refresh changes it. */
export function keySets(apiKeys: () => readonly string[]): () => KeySet {
  let current = new KeySet([]);
  return () => {
    const keys = apiKeys();
    if (keys !== current.keys) current = new KeySet(keys);
    return current;
  };
}

/**
 * Keeps one {@link ClientKeys} per configured key lists and `max_connections` (which gives a client's
 * default `max_queued`, `configuredClients`), rebuilt when a config refresh changes them.
 */
export function clientKeysOf(gateway: () => ClientSettings): () => ClientKeys {
  let lists: ClientSettings | undefined;
  let current: ClientKeys | undefined;
  return () => {
    const now = gateway();
    if (
      current === undefined ||
      now.api_keys !== lists?.api_keys ||
      now.clients !== lists.clients ||
      now.max_connections !== lists.max_connections
    ) {
      lists = { api_keys: now.api_keys, clients: now.clients, max_connections: now.max_connections };
      current = new ClientKeys(lists);
    }
    return current;
  };
}

/**
 * Client auth and identity (`gateway.api_keys`, `gateway.clients`; README "Security", "Clients,
 * priority and fair share"): `Authorization: Bearer <key>` must be one configured key, resolved to its
 * client in constant time (`ClientKeys`: SHA-256 digests, every key compared). No keys configured =
 * no client auth, and every request is the client `anonymous`. The client, with the band the
 * `x-iop-priority` header may lower (`requestClient`), goes on the request context
 * (`res.locals.client`) for the queue, the access log and the metrics; the key never does. Keys are
 * read per request so a config refresh applies at once. A refusal carries `WWW-Authenticate: Bearer`.
 * A malformed `x-iop-priority` is refused once the key is known, so its `400` carries the client id
 * (at the client's own band) in the access log and the `client` label of the metrics.
 * @throws ApiError 401 `invalid_api_key`, 400 for a malformed `x-iop-priority` (through `next`).
 */
export function apiKeyAuth(gateway: () => ClientSettings): GatewayHandler {
  const current = clientKeysOf(gateway);
  const unlowered = unloweredClients();
  return (req, res, next) => {
    const keys = current();
    const match = keys.open ? null : /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
    const client = keys.resolve(match?.[1].trim());
    if (client === undefined) {
      // RFC 6750: a 401 names the scheme it wants.
      res.setHeader('www-authenticate', 'Bearer');
      return next(invalidApiKey());
    }
    const priority = req.headers[PRIORITY_HEADER];
    try {
      res.locals.client = priority === undefined ? unlowered(keys, client) : requestClient(client, priority, keys.sole);
    } catch (err) {
      // The key was accepted: the 400 for the header is this client's, in the log and the metrics.
      res.locals.client = requestClient(client, undefined);
      return next(err);
    }
    next();
  };
}

/**
 * The queue's view of each client of a request without `x-iop-priority` (`requestClient` with no
 * header: the client's own band), built once per client and key lists and shared by its requests:
 * nobody changes a `QueueClient`. Rebuilt when a config refresh brings new key lists.
 */
function unloweredClients(): (keys: ClientKeys, client: FlowClient) => QueueClient {
  let of: ClientKeys | undefined;
  const built = new Map<FlowClient, QueueClient>();
  return (keys, client) => {
    if (keys !== of) {
      of = keys;
      built.clear();
    }
    let view = built.get(client);
    if (view === undefined) built.set(client, (view = requestClient(client, undefined, keys.sole)));
    return view;
  };
}

/** 401 of the status routes: the answer names the setting, never a key. */
export const invalidStatusKey = () => new ApiError({ code: 'invalid_api_key', fields: { keys: 'status.api_keys' } });

/**
 * Auth of `/status` and `/metrics` (README "Security", `status.api_keys`): `Bearer <key>` or HTTP
 * Basic auth with the key as password; no keys configured = open. A refusal carries
 * `WWW-Authenticate: Basic` so a browser asks for the key. Probes (`/healthz`, `/readyz`) never
 * pass through this.
 * @throws ApiError 401 `invalid_api_key` (through `next`).
 */
export function statusKeyAuth(apiKeys: () => readonly string[]): GatewayHandler {
  const current = keySets(apiKeys);
  return (req, res, next) => {
    const keys = current();
    if (keys.open || keys.matches(presentedKey(req.headers.authorization))) return next();
    res.setHeader('www-authenticate', 'Basic realm="iop-edge status", charset="UTF-8"');
    next(invalidStatusKey());
  };
}
