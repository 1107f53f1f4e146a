import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * A request as the gateway's own middlewares read it: Node's `IncomingMessage`, plus the JSON body
 * the body gate parses into `body`. express's `Request` is one, so every {@link GatewayHandler}
 * also mounts on an express route (docs/architecture.md, "Request path").
 */
export interface GatewayRequest extends IncomingMessage {
  /** The parsed JSON body (`completionBody`); absent before the body gate has run. */
  body?: unknown;
}

/**
 * A response as the gateway's own middlewares write it: Node's `ServerResponse`, plus the request
 * context in `locals` (`request-context.d.ts`). No express method (`res.status`, `res.json`, ...):
 * the completion routes run without express's request and response prototypes.
 */
export interface GatewayResponse extends ServerResponse<IncomingMessage> {
  /** What one request's middlewares and handler hand each other (docs/architecture.md, "Request path"). */
  locals: Express.Locals;
}

/** Continues the chain; with a truthy `err`, answers it through the error handler instead (express's `next`). */
export type Next = (err?: unknown) => void;

/** One step of a completion route: answers, or calls `next` (with an error to refuse). May return a promise. */
export type GatewayHandler = (req: GatewayRequest, res: GatewayResponse, next: Next) => unknown;

/** The last step of a completion route: it answers; a rejected promise or a throw is answered as an error. */
export type GatewayEndpoint = (req: GatewayRequest, res: GatewayResponse) => unknown;

/** Answers an error of any step (express's 4-argument error middleware). Never calls `next` in this app. */
export type GatewayErrorHandler = (err: unknown, req: GatewayRequest, res: GatewayResponse, next: Next) => void;

/** The path of `req` without its query string: express's `req.path` where express routed it. */
export function requestPath(req: IncomingMessage): string {
  const routed = (req as { path?: unknown }).path;
  if (typeof routed === 'string') return routed;
  const url = req.url ?? '/';
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

/**
 * Runs one completion route on a plain Node request and response, as express's router runs a
 * route's handlers: each step in order while it calls `next()`; `next(err)`, a throw or a rejected
 * promise goes to `onError`; the endpoint ends the chain. `res.locals` is made here, as express
 * makes it. No express prototypes are set, so a step may only use what {@link GatewayResponse}
 * declares (docs/architecture.md, "Request path": why the completions bypass express's router).
 */
export function runRoute(
  steps: readonly GatewayHandler[],
  endpoint: GatewayEndpoint,
  onError: GatewayErrorHandler,
  req: GatewayRequest,
  res: GatewayResponse,
): void {
  res.locals = {};
  let at = 0;
  let failed = false;
  const fail = (err: unknown) => {
    // One error answer per request, as express's router gives: a late second failure is not answered again.
    if (failed) return;
    failed = true;
    onError(err, req, res, ended);
  };
  const ended: Next = () => {
    if (!res.writableEnded) res.end();
  };
  const next: Next = (err) => {
    if (err) return fail(err);
    const step = steps[at++];
    try {
      const result = step === undefined ? endpoint(req, res) : step(req, res, next);
      if (isThenable(result))
        result.then(undefined, (rejected: unknown) => fail(rejected ?? new Error('Rejected promise')));
    } catch (thrown) {
      fail(thrown);
    }
  };
  next();
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}
