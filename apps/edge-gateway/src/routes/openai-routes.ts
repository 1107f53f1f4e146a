import { listModels } from '@iop/dispatch';
import { Router, type IRouter } from 'express';
import { dispatchCompletion } from '../dispatch/dispatch-completion';
import type { CompletionEndpoint, DispatcherDeps } from '../dispatch/dispatcher-deps';
import type { DispatchOutcome } from '../dispatch/outcome';
import { echoed, invalidRequest, methodNotAllowed, modelNotFound } from '../errors';
import { parseChatRequest, parseResponsesRequest } from '../http/request/request-schemas';
import { parseEmbeddingsRequest } from '../http/request/embeddings-request';
import type { GatewayEndpoint, GatewayHandler } from '../http/gateway-handler';

/** `GET /v1/models/{id}`: everything after this prefix is the model id. */
const MODEL_PREFIX = '/v1/models/';

/** The per-request steps every OpenAI route runs before its handler, in this order. */
export interface OpenAiRouteGates {
  /** Access log and metrics of a completion request (`observeCompletions`). */
  observe: GatewayHandler;
  /** Client auth (`apiKeyAuth`). */
  auth: GatewayHandler;
  /** JSON body, bounded by `gateway.max_body_bytes`. */
  json: GatewayHandler;
}

/** The completion endpoints, by path. */
const COMPLETION_PATHS: ReadonlyArray<readonly [string, CompletionEndpoint]> = [
  ['/v1/chat/completions', 'chat'],
  ['/v1/responses', 'responses'],
  // Pooled like chat (README "Embeddings"): admission, leases, failover, health.
  ['/v1/embeddings', 'embeddings'],
];

/** One completion route as the gateway serves it: its steps in order, then its endpoint. */
export interface CompletionRoute {
  /** The request id, the `/v1` edge (CORS, topology headers), the observer, auth and the body gate. */
  steps: readonly GatewayHandler[];
  /** Parses the body and dispatches it (`dispatchCompletion`). */
  endpoint: GatewayEndpoint;
}

/**
 * `POST /v1/chat/completions`, `/v1/responses` and `/v1/embeddings`, stream and not (the hot path,
 * see tools/bench). Each is one route whose steps are the request id, the `/v1` edge (CORS,
 * topology headers), then the gates, then the endpoint. Each is mounted on `app` (for the spellings
 * express's router matches and a plain server does not: another letter case, a trailing slash, a
 * query string) before the app-wide request id and `/v1` edge middlewares and {@link openAiRoutes},
 * and returned by exact path for `createApp`, which runs a request for one of those exact paths
 * without express (`runRoute`). Bodies are parsed and checked here; dispatch lives in `dispatchCompletion`.
 * @returns the routes by path, e.g. `/v1/chat/completions`
 */
export function completionRoutes(
  app: IRouter,
  deps: DispatcherDeps,
  gates: OpenAiRouteGates & { requestId: GatewayHandler; edge: GatewayHandler },
): ReadonlyMap<string, CompletionRoute> {
  const routes = new Map<string, CompletionRoute>();
  for (const [path, endpoint] of COMPLETION_PATHS) {
    const parse =
      endpoint === 'chat'
        ? parseChatRequest
        : endpoint === 'responses'
          ? parseResponsesRequest
          : parseEmbeddingsRequest;
    const handler: GatewayEndpoint = async (req, res) => {
      const body = parse(req.body);
      const outcome: DispatchOutcome = { routeKind: 'direct' };
      res.locals.outcome = outcome;
      res.locals.model = body.model;
      await dispatchCompletion(deps, endpoint, body, res, outcome);
    };
    const steps = [gates.requestId, gates.edge, gates.observe, gates.auth, gates.json];
    app.post(path, ...steps, handler);
    routes.set(path, { steps, endpoint: handler });
  }
  return routes;
}

/**
 * The rest of the OpenAI surface (docs/architecture.md, "HTTP surface"): `GET /v1/models`, `GET /v1/models/{id}`, and 405 for
 * a known path with the wrong method. The completions are {@link completionRoutes}.
 */
export function openAiRoutes(deps: DispatcherDeps, startedAtS: number, gates: OpenAiRouteGates): Router {
  const router = Router();

  const modelObject = (id: string) => ({ id, object: 'model', created: startedAtS, owned_by: 'iop-edge' });
  router.get('/v1/models', gates.auth, (_req, res) => {
    res.json({ object: 'list', data: listModels(deps.config()).map(modelObject) });
  });
  // Model names may contain "/" (e.g. meta-llama/Llama-3.1-8B-Instruct): the id is the whole rest of
  // the path. Decoded here, after auth, so a malformed path is never answered before the key is checked.
  router.use((req, res, next) => {
    if (!req.path.startsWith(MODEL_PREFIX) || (req.method !== 'GET' && req.method !== 'HEAD')) return next();
    gates.auth(req, res, (err?: unknown) => {
      if (err) return next(err);
      let id: string;
      try {
        id = decodeURIComponent(req.path.slice(MODEL_PREFIX.length));
      } catch {
        return next(
          invalidRequest(
            `The path ${echoed(req.path)} is not valid percent-encoding; write a model id as GET /v1/models/{id}, percent-encoding reserved characters.`,
            'model',
          ),
        );
      }
      if (!listModels(deps.config()).includes(id)) return next(modelNotFound(id));
      res.json(modelObject(id));
    });
  });
  // A known path with the wrong method is a 405 with `Allow`, not a misleading 404.
  for (const [path, allow] of [
    ['/v1/chat/completions', 'POST'],
    ['/v1/responses', 'POST'],
    ['/v1/embeddings', 'POST'],
    ['/v1/models', 'GET'],
  ] as const) {
    router.all(path, gates.auth, (req, res, next) => {
      res.setHeader('allow', allow);
      next(methodNotAllowed({ method: req.method, path, allow }));
    });
  }
  return router;
}
