import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import express, { type Express, type Router } from 'express';
import { sendError } from '../http/send-error';
import type { Job } from 'bullmq';
import type { ProviderQueueEntry } from '../queues/provider-queues';
import { BOARD_PATH } from './board-path';

/** The only methods the board answers: it is read-only (README "Status": the queue board). */
const READ_METHODS = new Set(['GET', 'HEAD']);

/**
 * The board's pages take scripts, styles, images and API calls from the exporter only: the UI's
 * Google Fonts stylesheet is not fetched (the page falls back to the system font), so opening the
 * board sends nothing to a third party.
 */
const BOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'self'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** A Bull Board over the provider queues, and how to change the queues it lists. */
export interface QueueBoard {
  /** The board: mount it at {@link BOARD_PATH}, behind the status keys. Refuses every method but GET and HEAD. */
  readonly router: Router;
  /** Lists exactly `entries` from now on (called when the tracked providers change). */
  show(entries: readonly ProviderQueueEntry[]): void;
}

/**
 * A read-only Bull Board (`@bull-board/api` with its BullMQ adapter, `@bull-board/express`) over the
 * provider queues (README "Status": the queue board; docs/architecture.md, "HTTP surface"): one
 * entry per provider, named by its provider id, each adapter in `readOnlyMode` (the UI offers no
 * retry, clean, pause, promote, add or remove, and the board's API answers those `405`), and in front
 * of the board a gate that answers any method other than GET and HEAD `405 method_not_allowed`
 * (OpenAI-shaped, `Allow: GET, HEAD`) before the board sees it, whatever a board version routes.
 * The board's own workers view is off: no BullMQ worker ever runs on these queues.
 */
export function createQueueBoard(entries: readonly ProviderQueueEntry[] = []): QueueBoard {
  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath(BOARD_PATH);
  const board = createBullBoard({
    queues: adapters(entries),
    serverAdapter,
    options: {
      uiConfig: {
        boardTitle: 'iop-edge queues',
        showWorkers: false,
        miscLinks: [{ text: 'Resources dashboard', url: '../' }],
      },
    },
  });
  const boardApp = serverAdapter.getRouter() as Express;
  boardApp.disable('x-powered-by');
  const router = express.Router();
  router.use((req, res, next) => {
    if (!READ_METHODS.has(req.method)) {
      res.setHeader('allow', 'GET, HEAD');
      return sendError(res, {
        code: 'method_not_allowed',
        fields: {
          method: req.method,
          path: req.originalUrl.split('?')[0],
          allow: 'GET or HEAD (the queue board is read-only)',
        },
      });
    }
    res.setHeader('content-security-policy', BOARD_CSP);
    if (req.path.startsWith('/api/')) res.setHeader('cache-control', 'no-store');
    next();
  });
  router.use(boardApp);
  return { router, show: (next) => board.replaceQueues(adapters(next)) };
}

/** The statuses Bull Board may ask {@link GrantOrderAdapter.getJobs} for (`@bull-board/api`'s `JobStatus`). */
type BoardJobStatus = Parameters<BullMQAdapter['getJobs']>[0][number];

/**
 * Bull Board's BullMQ adapter, but a page of the `prioritized` state lists the waiting requests in
 * grant order (README "Status": the queue board): ascending score of BullMQ's `prioritized` sorted
 * set, the score being `rank · 2^32 + start tag` (rank `1001 − band`), so the highest band first
 * and, inside a band, the lowest fair-share tag first (docs/architecture.md, "Clients, priority and
 * fair share"; "Redis layout of flow control"), as BullMQ's own `getPrioritized` lists them. The
 * stock adapter calls `Queue.getJobs` without `asc`, which reads a sorted set highest score first:
 * the request served last at the top. Other views keep the adapter's order (`latest`, every state
 * at once, newest first).
 */
class GrantOrderAdapter extends BullMQAdapter {
  constructor(
    private readonly providerQueue: ProviderQueueEntry['queue'],
    options: ConstructorParameters<typeof BullMQAdapter>[1],
  ) {
    super(providerQueue, options);
  }

  override getJobs(jobStatuses: BoardJobStatus[], start?: number, end?: number): Promise<Job[]> {
    if (jobStatuses.length === 1 && jobStatuses[0] === 'prioritized')
      return this.providerQueue.getJobs(['prioritized'], start, end, true).then((jobs) => jobs.filter((job) => !!job));
    return super.getJobs(jobStatuses, start, end);
  }
}

/** One read-only BullMQ adapter per provider queue, shown under the provider id, waiting requests in grant order. */
function adapters(entries: readonly ProviderQueueEntry[]): BullMQAdapter[] {
  return entries.map(
    ({ providerId, queue }) =>
      new GrantOrderAdapter(queue, {
        readOnlyMode: true,
        allowRetries: false,
        displayName: providerId,
        description: 'waiting requests: prioritized · leases: active',
      }),
  );
}
