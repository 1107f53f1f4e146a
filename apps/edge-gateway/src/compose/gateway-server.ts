import { answerClientErrors, type ClientErrorLogger, type CloseList } from '@iop/runtime';
import type { EdgeConfig } from '@iop/validate';
import { createServer, type Server } from 'node:http';
import { refuseBeforeBody } from '../http/access/refuse-before-body';
import { answerContinue, applyServerLimits, lingering, SERVER_OPTIONS } from '../http/access/server-limits';
import { requestIdFrom } from '../http/request/request-id';
import type { GatewayApp } from '../app';

/** How long idle keep-alive connections stay open, in ms: longer than the usual load balancer's 60 s idle timeout. */
/** How often the drain closes the keep-alive connections that turned idle, in ms. */
const IDLE_SWEEP_MS = 100;
/** How long requests cut by the end of the drain get to write their 503 or error event before their connections close, in ms. */
const SHUTDOWN_ANSWER_MS = 200;

/**
 * The gateway's HTTP server around `app`, not yet listening, with the connection cap and the
 * header and body times of README "Security" taken from `config().gateway` (`applyServerLimits`;
 * call it again on every reload), `Expect: 100-continue` answered only once the key is checked and
 * the declared size is within `max_body_bytes` (`refuseBeforeBody`), and
 * requests Node's parser refuses before the app runs answered as OpenAI errors (400, 408, 431, and 417
 * for an `Expect` other than `100-continue`; README
 * "Errors"), logged to `logger` with their request id; a connection that only lingers after such
 * an answer is the first a newcomer at the connection cap closes.
 */
export function createGatewayServer(app: GatewayApp, config: () => EdgeConfig, logger?: ClientErrorLogger): Server {
  const server = createServer(SERVER_OPTIONS, app);
  applyServerLimits(server, config().gateway);
  answerContinue(server, refuseBeforeBody(config), app);
  answerClientErrors(server, {
    logger,
    onLinger: (socket) => lingering(server, socket),
    requestIdOf: (req) => requestIdFrom(req.headers['x-request-id']),
  });
  return server;
}

/**
 * Once `server` listens: registers its close hook (its keep-alive time comes from
 * `gateway.keep_alive_timeout_ms`, `applyServerLimits`), which after a
 * drain finds the server closed and on a fatal error cuts every connection.
 * @returns the address it is bound to as `host:port`, for the log and the "listening on" line; an
 *   IPv6 host in brackets (`[::1]:8080`), so that `http://` before it is a URL (RFC 3986 §3.2.2)
 */
export function serverListening(server: Server, toClose: CloseList, fallback: string): string {
  toClose.add('server', async () => {
    if (!server.listening) return;
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  const address = server.address();
  if (typeof address !== 'object' || !address) return fallback;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `${host}:${address.port}`;
}

/**
 * The gateway's drain on SIGTERM or SIGINT (README "Production layout"): no new connections;
 * keep-alive connections close as their requests finish, not after `keepAliveTimeout`; requests
 * still running after `graceMs` (`IOP_SHUTDOWN_GRACE_MS`) see `shutdown` aborted and get their 503
 * or error event, and their connections close {@link SHUTDOWN_ANSWER_MS} later.
 * Resolves once the server has closed.
 */
export async function drainServer(server: Server, shutdown: AbortController, graceMs: number): Promise<void> {
  const closed = new Promise<void>((r) => server.close(() => r()));
  server.closeIdleConnections();
  const sweep = setInterval(() => server.closeIdleConnections(), IDLE_SWEEP_MS);
  const grace = setTimeout(() => {
    shutdown.abort();
    setTimeout(() => server.closeAllConnections(), SHUTDOWN_ANSWER_MS).unref();
  }, graceMs);
  await closed;
  clearInterval(sweep);
  clearTimeout(grace);
}
