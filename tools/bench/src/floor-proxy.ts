/**
 * What the two Node floors of the benchmark share (`bare-proxy.ts`: target `node-floor`;
 * `express-floor.ts`: target `express-floor`): the command line, one undici `Pool` to the upstream,
 * the per-request forwarding (read the body, `JSON.parse`, rename `model`, `JSON.stringify`, POST it
 * upstream through `Pool.dispatch`, relay status, content type and every chunk back with `res.write`)
 * and the ready line. The floors differ only in what routes a request to {@link FloorProxy.forward}.
 * See README "Benchmarks" for why the floor is built this way.
 *
 * With `--redis URL --redis-round-trips N` (the Redis-cost scenario's round-trip floor), each request
 * also makes N sequential `PING`s on one ioredis connection (auto-pipelining on, as the gateway's
 * Redis backend): the first before the upstream call, the others after the answer has been written,
 * where the gateway admits and releases. What Redis spends on them is what any design that makes N
 * round trips per request pays at that pace, before its scripts do anything.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { Pool, type Dispatcher } from 'undici';

const JSON_HEADERS = { 'content-type': 'application/json' };

/** One floor proxy process: its options and its forwarding handler. */
export interface FloorProxy {
  /**
   * Forwards one request to the upstream and relays the answer (status, content type, body chunk by
   * chunk). Answers 400 `{"error":{"message":"invalid JSON"}}` to a body that is not JSON and 502 when
   * the upstream fails before its status line. Never throws.
   */
  forward: (req: IncomingMessage, res: ServerResponse) => void;
  /**
   * Listens on `--host`:`--port`, prints `<name> listening on http://HOST:PORT` once it does, and closes
   * the server and the pool on SIGTERM (exit status 0).
   */
  serve: (server: Server) => void;
}

/**
 * Parses `--upstream http://HOST:PORT/v1 [--model NAME] [--port 0] [--host 127.0.0.1] [--redis URL
 * --redis-round-trips N]` from `process.argv` and opens the pool (and the Redis connection). Exits
 * the process with status 2 and a usage line when `--upstream` is missing, N is not a whole number,
 * or N is above 0 without `--redis`.
 * @param name the program's name in the usage and ready lines, e.g. `bare-proxy`.
 */
export function floorProxy(name: string): FloorProxy {
  const { values } = parseArgs({
    options: {
      upstream: { type: 'string' },
      model: { type: 'string' },
      port: { type: 'string', default: '0' },
      host: { type: 'string', default: '127.0.0.1' },
      redis: { type: 'string' },
      'redis-round-trips': { type: 'string', default: '0' },
    },
  });
  const roundTrips = Number(values['redis-round-trips']);
  if (!values.upstream || !Number.isInteger(roundTrips) || roundTrips < 0 || (roundTrips > 0 && !values.redis)) {
    process.stderr.write(
      `usage: ${name} --upstream http://HOST:PORT/v1 [--model NAME] [--port 0] [--host 127.0.0.1] [--redis URL --redis-round-trips N]\n`,
    );
    process.exit(2);
  }
  const redis = roundTrips > 0 && values.redis ? new Redis(values.redis, { enableAutoPipelining: true }) : undefined;
  const upstream = new URL(values.upstream.replace(/\/$/, ''));
  const basePath = upstream.pathname;
  const model = values.model;
  // No cap on connections (as the gateway): 400 concurrent streams must not wait for one another.
  const pool = new Pool(upstream.origin, { keepAliveTimeout: 60_000, pipelining: 1 });

  const forward = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      let body: { model?: unknown };
      try {
        body = JSON.parse((chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)).toString('utf8')) as {
          model?: unknown;
        };
      } catch {
        res.writeHead(400, JSON_HEADERS).end('{"error":{"message":"invalid JSON"}}');
        return;
      }
      // The rename a gateway does (public model name → the upstream's), so the body is re-serialised.
      if (model) body.model = model;
      if (redis) return void withRoundTrips(redis, roundTrips, res, () => send(body, req.url, res));
      send(body, req.url, res);
    });
  };

  const send = (body: { model?: unknown }, url: string | undefined, res: ServerResponse): void => {
    pool.dispatch(
      {
        path: `${basePath}${url?.replace(/^\/v1/, '') ?? ''}`,
        method: 'POST',
        headers: JSON_HEADERS,
        body: JSON.stringify(body),
      },
      relay(res),
    );
  };

  const serve = (server: Server): void => {
    server.listen(Number(values.port), values.host, () => {
      const { address, port } = server.address() as AddressInfo;
      process.stdout.write(`${name} listening on http://${address}:${port}\n`);
    });
    process.once('SIGTERM', () => {
      server.close();
      server.closeAllConnections();
      redis?.disconnect();
      void pool.close().finally(() => process.exit(0));
    });
  };
  return { forward, serve };
}

/**
 * The round-trip floor's Redis work for one request: a `PING`, then `send()`; once the answer has been
 * written, `n - 1` more, one after another. A failed `PING` is a 502 (before the call) or ends the
 * chain (after it).
 */
function withRoundTrips(redis: Redis, n: number, res: ServerResponse, send: () => void): void {
  res.once('finish', () => {
    let chain = Promise.resolve<unknown>(undefined);
    for (let i = 1; i < n; i++) chain = chain.then(() => redis.ping());
    chain.catch(() => undefined);
  });
  redis
    .ping()
    .then(send, (err: Error) =>
      res.writeHead(502, JSON_HEADERS).end(JSON.stringify({ error: { message: err.message } })),
    );
}

/** Relays one upstream answer to `res`: status, content type, then every chunk as it comes. */
function relay(res: ServerResponse): Dispatcher.DispatchHandler {
  let started = false;
  return {
    onRequestStart(controller) {
      res.once('close', () => {
        if (!res.writableFinished) controller.abort(new Error('client left'));
      });
    },
    onResponseStart(controller, statusCode, headers) {
      started = true;
      res.writeHead(statusCode, { 'content-type': String(headers['content-type'] ?? 'application/json') });
      res.on('drain', () => controller.resume());
    },
    onResponseData(controller, chunk) {
      if (!res.write(chunk)) controller.pause();
    },
    onResponseEnd() {
      res.end();
    },
    onResponseError(_controller, err) {
      if (started) res.destroy(err);
      else res.writeHead(502, JSON_HEADERS).end(JSON.stringify({ error: { message: err.message } }));
    },
  };
}
