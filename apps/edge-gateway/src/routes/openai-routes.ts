import { listModels } from '@iop/dispatch';
import { Router, type RequestHandler } from 'express';
import { dispatchCompletion, type CompletionEndpoint, type DispatcherDeps, type DispatchOutcome } from '../completion-dispatcher';
import { parseChatRequest, parseResponsesRequest } from '../http/request-schemas';

/** The per-request steps every OpenAI route runs before its handler, in this order. */
export interface OpenAiRouteGates {
  /** Access log and metrics of a completion request (`observeCompletions`). */
  observe: RequestHandler;
  /** Client auth (`apiKeyAuth`). */
  auth: RequestHandler;
  /** JSON body, bounded by `gateway.max_body_bytes`. */
  json: RequestHandler;
}

/**
 * The OpenAI surface (DESIGN §6): `GET /v1/models`, `POST /v1/chat/completions`,
 * `POST /v1/responses`, stream and not. Bodies are parsed and checked here; dispatch lives in
 * `dispatchCompletion`. Each route carries its own gates so a completion walks one route, not a
 * chain of app-wide middleware (the hot path, see tools/bench).
 */
export function openAiRoutes(deps: DispatcherDeps, startedAtS: number, gates: OpenAiRouteGates): Router {
  const router = Router();

  const completion = (endpoint: CompletionEndpoint): RequestHandler => {
    const parse = endpoint === 'chat' ? parseChatRequest : parseResponsesRequest;
    return async (req, res) => {
      const body = parse(req.body);
      const outcome: DispatchOutcome = { routeKind: 'direct' };
      res.locals.outcome = outcome;
      res.locals.model = body.model;
      await dispatchCompletion(deps, endpoint, body, res, outcome);
    };
  };
  router.post('/v1/chat/completions', gates.observe, gates.auth, gates.json, completion('chat'));
  router.post('/v1/responses', gates.observe, gates.auth, gates.json, completion('responses'));

  router.get('/v1/models', gates.auth, (_req, res) => {
    const data = listModels(deps.config()).map((id) => ({ id, object: 'model', created: startedAtS, owned_by: 'iop-edge' }));
    res.json({ object: 'list', data });
  });
  return router;
}
