import { listModels } from '@iop/dispatch';
import { Router } from 'express';
import { dispatchCompletion, type CompletionEndpoint, type DispatcherDeps, type DispatchOutcome } from '../completion-dispatcher';
import { parseChatRequest, parseResponsesRequest } from '../http/request-schemas';

/**
 * The OpenAI surface (DESIGN §6): `GET /v1/models`, `POST /v1/chat/completions`,
 * `POST /v1/responses`, stream and not. Bodies are parsed and checked here; dispatch lives in
 * `dispatchCompletion`.
 */
export function openAiRoutes(deps: DispatcherDeps, startedAtS: number): Router {
  const router = Router();

  router.get('/v1/models', (_req, res) => {
    const data = listModels(deps.config()).map((id) => ({ id, object: 'model', created: startedAtS, owned_by: 'iop-edge' }));
    res.json({ object: 'list', data });
  });

  const completion = (endpoint: CompletionEndpoint) => {
    const parse = endpoint === 'chat' ? parseChatRequest : parseResponsesRequest;
    return async (req: Parameters<Parameters<typeof router.post>[1]>[0], res: Parameters<Parameters<typeof router.post>[1]>[1]) => {
      const body = parse(req.body);
      const outcome: DispatchOutcome = { routeKind: 'direct' };
      res.locals.outcome = outcome;
      res.locals.model = body.model;
      await dispatchCompletion(deps, endpoint, body, res, outcome);
    };
  };
  router.post('/v1/chat/completions', completion('chat'));
  router.post('/v1/responses', completion('responses'));
  return router;
}
