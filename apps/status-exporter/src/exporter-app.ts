import type { ClientBudgetWindow, ClientCounts, HealthView, ProviderCounts, QueueCounts } from '@iop/dispatch';
import {
  buildFlowStatus,
  buildSnapshot,
  registerConfigInfoGauge,
  ResourceGauges,
  trackedProviderIds,
  type StatusSnapshot,
} from '@iop/status';
import { configDigest, KeySet, presentedKey, type EdgeConfig } from '@iop/validate';
import express, { type Express, type RequestHandler } from 'express';
import type { Logger } from 'pino';
import { Gauge, Registry } from 'prom-client';
import { BOARD_PATH } from './board/board-path';
import { DASHBOARD_HTML } from './dashboard/dashboard-page';
import { echoed, sendError } from './http/send-error';

/** Everything the exporter's HTTP app needs; the I/O (Redis) lives behind `counts` (docs/architecture.md, "Layering": pure core, thin edges). */
export interface ExporterDeps {
  /** The config in force. */
  config(): EdgeConfig;
  /**
   * Cluster-wide counts of the given providers and every client's counts per pool, read together
   * (`readQueueCounts` on the shared Redis: one read-only script per shard tag, so a pool's counts and
   * its clients' are of one instant and its `parked` is exact; docs/architecture.md, "Status model",
   * "Clients, priority and fair share"). A rejection means "unknown now": the snapshot then shows
   * `null` counts, never 0.
   */
  counts(providerIds: readonly string[]): Promise<QueueCounts>;
  /**
   * The windows of the budgeted clients, fleet-wide (`readTokenBudgets` on the shared Redis, Redis time;
   * README "Token budgets"). Without it, or when it rejects, each budgeted client's `token_budgets` is
   * `null`; the counts are not affected.
   */
  clientBudgets?(): Promise<ClientBudgetWindow[]>;
  /** The read-only queue board (`createQueueBoard`), served at `/queues` behind the status keys. */
  board?: RequestHandler;
  /** When the config in force was loaded: with it the snapshot carries `config_hash` (`configDigest`) and `config_loaded_at`. */
  configInfo?(): { hash: string; loadedAt: Date };
  /** Ids of providers the fleet marked unhealthy (shared health, docs/architecture.md "Provider health"); a rejection shows them as not unhealthy. */
  unhealthy?(providerIds: readonly string[]): Promise<ReadonlySet<string>>;
  /** Each provider's health record as read by the last `unhealthy` call (README "Provider health"), shown as `health` in `/status`. */
  healthViews?(): ReadonlyMap<string, HealthView>;
  logger: Logger;
}

/** The snapshot source shared by the HTTP routes and the pusher. */
export interface SnapshotSource {
  /** Builds a snapshot now; never rejects (failed counts become `null`). `countsOk` says whether counts were read. */
  read(): Promise<{ snapshot: StatusSnapshot; countsOk: boolean }>;
}

/**
 * The resource-first snapshot with cluster-wide counts (docs/architecture.md, "Status model"): asks `deps.counts` for the
 * tracked providers (`trackedProviderIds`) and the clients, in one snapshot, and on failure logs
 * once per outage and publishes `null`. With `pools` and `clients` as the gateway's `/status` has them
 * (`buildFlowStatus`; docs/architecture.md, "Clients, priority and fair share"), and the budgeted
 * clients' `token_budgets` from `deps.clientBudgets`, read beside the counts (a failure there shows
 * `null` budgets only, logged once per outage).
 */
export function snapshotSource(deps: ExporterDeps): SnapshotSource {
  let failing = false;
  let budgetsFailing = false;
  const readBudgets = async (): Promise<ClientBudgetWindow[] | undefined> => {
    if (!deps.clientBudgets) return undefined;
    try {
      const budgets = await deps.clientBudgets();
      if (budgetsFailing) deps.logger.info('status-exporter: token budgets readable again');
      budgetsFailing = false;
      return budgets;
    } catch (err) {
      if (!budgetsFailing) deps.logger.warn({ err }, 'status-exporter: cannot read token budgets; publishing null');
      budgetsFailing = true;
      return undefined;
    }
  };
  return {
    async read() {
      const config = deps.config();
      const reading = readBudgets();
      let counts: Map<string, ProviderCounts> | undefined;
      let clientCounts: ClientCounts[] | undefined;
      try {
        ({ providers: counts, clients: clientCounts } = await deps.counts(trackedProviderIds(config)));
        if (failing) deps.logger.info('status-exporter: counts readable again');
        failing = false;
      } catch (err) {
        counts = clientCounts = undefined;
        if (!failing) deps.logger.warn({ err }, 'status-exporter: cannot read counts; publishing null counts');
        failing = true;
      }
      const budgets = await reading;
      const unhealthy = await deps.unhealthy?.(trackedProviderIds(config)).catch(() => undefined);
      const health = new Map([...(unhealthy ?? [])].map((id) => [id, 'unhealthy' as const]));
      const info = deps.configInfo?.();
      const healthDetails = unhealthy ? deps.healthViews?.() : undefined;
      const snapshot = buildSnapshot(config, counts, {
        health,
        healthDetails,
        configHash: info && configDigest(config),
        configLoadedAt: info?.loadedAt,
      });
      return {
        snapshot: { ...snapshot, ...buildFlowStatus(config, counts, clientCounts, budgets) },
        countsOk: counts !== undefined,
      };
    },
  };
}

/**
 * Builds the exporter's express app without listening or other I/O (docs/architecture.md, "Layering", "HTTP surface"):
 * - `GET /status`: the snapshot JSON (cluster-wide counts);
 * - `GET /metrics`: Prometheus text: the `iop_edge_resource_*` gauges plus
 *   `iop_edge_status_counts_up` (1 when the counts source answered this scrape) and
 *   `iop_edge_config_info{hash}`;
 * - `GET /healthz`: `{"status":"ok"}` while the process serves;
 * - `GET /`: a self-contained HTML dashboard that polls `/status` every 2 s;
 * - `/queues` (with `deps.board`): the read-only queue board (`createQueueBoard`).
 * With `status.api_keys` set, `/status`, `/metrics`, `/` and `/queues` need one of the keys (`Bearer`,
 * or the password of HTTP Basic auth, which a browser asks for once and then sends with the pages' own
 * requests); `/healthz` stays open for probes (README "Security"). Another method than GET or HEAD on
 * `/status`, `/metrics`, `/healthz` or `/` is `405 method_not_allowed` with `Allow: GET, HEAD` (after
 * the status key, where one is needed); the board's own gate answers its 405s.
 */
export function createExporterApp(deps: ExporterDeps, source: SnapshotSource = snapshotSource(deps)): Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  const registry = new Registry();
  const gauges = new ResourceGauges(registry);
  const countsUp = new Gauge({
    name: 'iop_edge_status_counts_up',
    help: '1 when the exporter read the shared counts (Redis) for this scrape, else 0.',
    registers: [registry],
  });
  registerConfigInfoGauge(registry, deps.config);

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  const auth = statusKeys(() => deps.config().status.api_keys);
  app.get('/status', auth, async (_req, res) => {
    const { snapshot } = await source.read();
    res.setHeader('cache-control', 'no-store');
    res.json(snapshot);
  });
  app.get('/metrics', auth, async (_req, res) => {
    const { snapshot, countsOk } = await source.read();
    gauges.update(snapshot);
    countsUp.set(countsOk ? 1 : 0);
    res.setHeader('cache-control', 'no-store');
    res.type(registry.contentType).send(await registry.metrics());
  });
  app.get('/', auth, (_req, res) => {
    res.setHeader('cache-control', 'no-store');
    res.setHeader(
      'content-security-policy',
      "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:",
    );
    res.type('html').send(DASHBOARD_HTML);
  });
  // Another method on a known GET path: 405 with Allow (README "Errors"), once the status key is checked.
  for (const [path, gate] of [
    ['/healthz', open],
    ['/status', auth],
    ['/metrics', auth],
    ['/', auth],
  ] as const) {
    app.all(path, gate, (req, res) => {
      res.setHeader('allow', GET_AND_HEAD);
      sendError(res, { code: 'method_not_allowed', fields: { method: req.method, path, allow: GET_AND_HEAD } });
    });
  }
  if (deps.board) app.use(BOARD_PATH, auth, deps.board);
  const served = deps.board ? `/status, /metrics, /healthz, / and ${BOARD_PATH}` : '/status, /metrics, /healthz and /';
  // Any other path asks for the status key first: without one, the 401 alone, never the list of what is served.
  app.use(auth, (req, res) => {
    sendError(res, { code: 'not_found', fields: { method: req.method, path: echoed(req.path), served } });
  });
  return app;
}

/** What a path served by `app.get` allows: express answers HEAD with the GET route. */
const GET_AND_HEAD = 'GET, HEAD';

/** The gate of `/healthz`: open to every probe. */
const open: RequestHandler = (_req, _res, next) => next();

/** The status keys gate (`status.api_keys`): open without keys; else 401 with a Basic challenge. Keys are read per request. */
function statusKeys(apiKeys: () => readonly string[]): RequestHandler {
  let keys = new KeySet([]);
  return (req, res, next) => {
    const configured = apiKeys();
    if (configured !== keys.keys) keys = new KeySet(configured);
    if (keys.open || keys.matches(presentedKey(req.headers.authorization))) return next();
    res.setHeader('www-authenticate', 'Basic realm="iop-edge status", charset="UTF-8"');
    sendError(res, { code: 'invalid_api_key', fields: { keys: 'status.api_keys' } });
  };
}
