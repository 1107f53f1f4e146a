import type { GatewaySettings } from '@iop/validate';
import type { IncomingMessage, Server, ServerOptions, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { requestIdFrom } from '../request/request-id';
import { ConnectionSlots, type SlotLimits } from './connection-slots';
import { afterAPoll, LoopStalls } from './loop-stalls';
import type { HeadRefusal } from './refuse-before-body';

/**
 * How often the server looks for connections past their header or body time, in ms. Node's
 * default (30 s) would let a slow client overstay its limit by that much.
 */
export const CONNECTION_CHECK_INTERVAL_MS = 250;

/**
 * A gap longer than this between two samples of the event loop's clock is a stall
 * ({@link LoopStalls}), in ms: at least one connection check was missed.
 */
export const LOOP_STALL_MS = 2 * CONNECTION_CHECK_INTERVAL_MS;

/** Options for `http.createServer` so the time limits below are enforced at a useful granularity. */
export const SERVER_OPTIONS: ServerOptions = { connectionsCheckingInterval: CONNECTION_CHECK_INTERVAL_MS };

/** The settings {@link applyServerLimits} applies. */
export type ServerLimitSettings = Pick<
  GatewaySettings,
  'max_connections' | 'max_connections_per_address' | 'keep_alive_timeout_ms' | 'header_timeout_ms' | 'body_timeout_ms'
>;

/** The slots of each server and the settings they read, installed by the first {@link applyServerLimits}. */
const installed = new WeakMap<Server, { settings: ServerLimitSettings; slots: ConnectionSlots }>();

/** The slot limits of `settings`: an address's share defaults to half of `max_connections`. */
function slotLimits(settings: ServerLimitSettings): SlotLimits {
  const max = settings.max_connections;
  return { max, perAddress: settings.max_connections_per_address ?? Math.ceil(max / 2) };
}

/**
 * Applies the connection limits of README "Security" to the gateway's HTTP server, at start and on
 * every config reload (they are read on each connection or check):
 * - `gateway.max_connections` and `gateway.max_connections_per_address` (default: half of
 *   `max_connections`): {@link ConnectionSlots}; at the cap, or past an address's share, the oldest
 *   idle keep-alive connection is closed to make room, and only when none is idle is the new
 *   connection closed as it arrives;
 * - `gateway.keep_alive_timeout_ms`: an idle keep-alive connection is closed after this long
 *   (Node's `server.keepAliveTimeout`; {@link closeOnlyIdle});
 * - `gateway.header_timeout_ms`: a request's headers must be in within this time (from the
 *   request's first byte; a fresh connection that sends nothing counts from its opening), else
 *   `408 request_timeout` (answered by `answerClientErrors`, README "Errors") and the connection is closed;
 * - `gateway.body_timeout_ms`: the body then has this long more (the whole request is bounded by
 *   `header_timeout_ms + body_timeout_ms`), else `408` and the connection is closed.
 * Neither time bounds a response: a long stream runs on. None of these closes a connection whose
 * bytes only wait unread because the process's event loop stalled (stopped, starved): a
 * keep-alive close waits for one poll phase of the loop and is dropped if the connection read
 * anything meanwhile, and right after a stall ({@link LoopStalls}) the header and body times and
 * the choice of an idle connection to close at the cap wait the same way.
 */
export function applyServerLimits(server: Server, gateway: ServerLimitSettings): void {
  const current = installed.get(server);
  if (current) current.settings = gateway;
  else {
    const stalls = new LoopStalls(CONNECTION_CHECK_INTERVAL_MS, LOOP_STALL_MS);
    if (server.listening) stalls.start();
    server.on('listening', () => stalls.start());
    server.on('close', () => stalls.stop());
    const slots = new ConnectionSlots(() => slotLimits(installed.get(server)?.settings ?? gateway), stalls);
    installed.set(server, { settings: gateway, slots });
    slots.attach(server);
    closeOnlyIdle(server);
    holdTimeChecksAfterStalls(server, stalls);
  }
  server.keepAliveTimeout = gateway.keep_alive_timeout_ms;
  server.headersTimeout = gateway.header_timeout_ms;
  server.requestTimeout = gateway.header_timeout_ms + gateway.body_timeout_ms;
}

/**
 * Node closes a keep-alive connection idle for `server.keepAliveTimeout` (plus a margin of its own)
 * from a socket timer, which also runs when the process resumes from a stop before the request a
 * client sent meanwhile on that connection is read: closing then would reset a request that
 * reached the gateway. So `server` listens to `timeout` (Node then leaves the connection open, per
 * the Node.js HTTP reference on `server.timeout`) and closes the connection only once the loop has
 * run a poll phase ({@link afterAPoll}) without it reading a byte; one that read its next request
 * is served, and Node arms the keep-alive timer again when that answer is done. The gateway sets
 * no other socket timeout (`server.timeout` stays 0), so every `timeout` is a keep-alive one.
 */
function closeOnlyIdle(server: Server): void {
  server.on('timeout', (socket: Socket) => {
    const read = socket.bytesRead;
    afterAPoll(() => {
      if (!socket.destroyed && socket.bytesRead === read) socket.destroy();
    });
  });
}

/**
 * Node checks the header and request times every `connectionsCheckingInterval` from a timer that
 * reads `server.headersTimeout` and `server.requestTimeout` each time and skips the check when both
 * are 0. Right after a stall of the loop that timer runs before the sockets are read, and would
 * answer `408` to a connection whose headers wait in the kernel; so while `stalls` is settling
 * both read as 0 and that check is skipped (the next one, {@link CONNECTION_CHECK_INTERVAL_MS}
 * later, applies them). Setting them (`applyServerLimits`) works as before.
 */
function holdTimeChecksAfterStalls(server: Server, stalls: LoopStalls): void {
  for (const key of ['headersTimeout', 'requestTimeout'] as const) {
    let ms = server[key];
    Object.defineProperty(server, key, {
      configurable: true,
      enumerable: true,
      get: () => (stalls.settling() ? 0 : ms),
      set: (value: number) => {
        ms = value;
      },
    });
  }
}

/**
 * Marks a connection of `server` that only lingers after its last answer (a request Node's parser
 * refused, README "Errors") as idle for the connection slots: at the cap it is closed first to make
 * room, never keeping a newcomer out.
 */
export function lingering(server: Server, socket: Socket): void {
  installed.get(server)?.slots.lingering(socket);
}

/** After an early answer, how long unread request bytes are read and dropped before the connection is cut, in ms. */
export const LINGER_MS = 1000;
/** ... and how many bytes at most. */
export const LINGER_BYTES = 1024 * 1024;

/**
 * Closes the connection of a request answered before its body was read (a 413, 415 or 401 on an
 * upload), the way that lets the client read the answer (README "Security"): once the answer is
 * written, the gateway half-closes, then reads and drops what the client still sends for at most
 * {@link LINGER_MS} or {@link LINGER_BYTES}, then cuts the connection. Cutting it at once, with
 * unread bytes in flight, makes the kernel send a reset that can destroy the answer before the
 * client reads it. Nothing read is kept.
 */
export function lingerClose(req: IncomingMessage, res: ServerResponse): void {
  res.setHeader('connection', 'close');
  const socket = req.socket as Socket & { destroySoon?: () => void };
  // Node ends a `connection: close` answer with destroySoon(): a FIN, then a cut as soon as it is
  // written, unread bytes or not. Here the FIN alone; the cut comes below.
  socket.destroySoon = () => socket.end();
  res.once('finish', () => {
    let dropped = 0;
    const cut = () => socket.destroy();
    const timer = setTimeout(cut, LINGER_MS);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
    req.on('data', (chunk: Buffer) => {
      dropped += chunk.length;
      if (dropped > LINGER_BYTES) cut();
    });
    req.resume();
  });
}

/**
 * `Expect: 100-continue` (curl sends it for bodies over 1 MiB): a request refused from its head
 * alone (`refuse`, `refuseBeforeBody`: a 401 when its key is missing or wrong for its path,
 * checked first, then a completion whose declared `Content-Length` is over `gateway.max_body_bytes`,
 * 413) gets that answer instead of `100 Continue`, with `Connection: close`, and its body is never
 * read; any other request is continued and served as usual.
 */
export function answerContinue(
  server: Server,
  refuse: (req: IncomingMessage) => HeadRefusal | undefined,
  app: (req: IncomingMessage, res: ServerResponse) => void,
): void {
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    const refusal = refuse(req);
    if (refusal) {
      const { error, challenge } = refusal;
      // Answered before the app runs, so the request id is given here (README "Errors": every answer carries one).
      const body = JSON.stringify(error.toBody());
      res.writeHead(error.status, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(body),
        'x-request-id': requestIdFrom(req.headers['x-request-id']),
        ...(challenge ? { 'www-authenticate': challenge } : {}),
        connection: 'close',
      });
      res.end(body);
      return;
    }
    res.writeContinue();
    // Comes as this event, not `request`: the connection is busy all the same.
    installed.get(server)?.slots.busy(req.socket, res);
    app(req, res);
  });
}
