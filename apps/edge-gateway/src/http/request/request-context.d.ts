import type { QueueClient } from '@iop/dispatch';
import type { Logger } from 'pino';
import type { DispatchOutcome } from '../../dispatch/outcome';

declare global {
  namespace Express {
    /**
     * The typed request context: what one request's middlewares and handler hand each other in
     * `res.locals` (docs/architecture.md, "Request path"). Every field is optional because an app
     * built for a test may leave out the middleware that sets it.
     */
    interface Locals {
      /** The request's id (`assignRequestId`): the client's plain `x-request-id`, else a fresh UUID. */
      requestId?: string;
      /** The app's logger, the parent of the request's child logger. */
      baseLogger?: Logger;
      /** The request's child logger bound to `{ request_id }`, made on first use (`requestLogger`). */
      log?: Logger;
      /** The `model` of a parsed completion body, for the access line and the metrics' labels. */
      model?: string;
      /** Who sent the request, with its band for this request (`apiKeyAuth`); never its key. */
      client?: QueueClient;
      /** Where the request went (route kind, node, provider, queue wait), filled in by the dispatcher. */
      outcome?: DispatchOutcome;
    }
  }
}
