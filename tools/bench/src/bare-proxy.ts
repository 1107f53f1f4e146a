/**
 * The Node floor of the benchmark (target `node-floor`): the least a Node proxy in front of the
 * same upstream can do, written as fast as Node allows so the floor is honest. Node `http` server,
 * one undici `Pool` to the upstream (keep-alive, no cap on connections as in the gateway, no pipelining), and per request:
 * read the body, `JSON.parse`, rename `model`, `JSON.stringify`, POST it upstream through
 * `Pool.dispatch` (no response `Readable`), relay status, content type and body back with
 * `res.write` chunk by chunk (streams included, backpressure by pausing the upstream). No auth, no
 * validation, no admission, no logging, no metrics: what the gateway adds on top of this is its own cost.
 *
 * Design measured on 2 cores at c=64 (CPU of the proxy per request, same run): `Agent` +
 * `request` + `stream.pipeline` ≈ 140 µs; `Pool` + `request` + `pipeline` ≈ 145 µs; `Pool` +
 * `request` + `res.write` ≈ 70 µs; `Pool` + `dispatch` + `res.write` ≈ 60–70 µs (kept). See
 * README "Benchmarks".
 *
 * `node dist/tools/bench/bare-proxy.js --upstream http://127.0.0.1:PORT/v1 [--model NAME]
 * [--port 0] [--host 127.0.0.1]`; prints `bare-proxy listening on http://HOST:PORT` when ready.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { Pool, type Dispatcher } from 'undici';

const { values } = parseArgs({
  options: {
    upstream: { type: 'string' },
    model: { type: 'string' },
    port: { type: 'string', default: '0' },
    host: { type: 'string', default: '127.0.0.1' },
  },
});
if (!values.upstream) {
  process.stderr.write(
    'usage: bare-proxy --upstream http://HOST:PORT/v1 [--model NAME] [--port 0] [--host 127.0.0.1]\n',
  );
  process.exit(2);
}
const upstream = new URL(values.upstream.replace(/\/$/, ''));
const basePath = upstream.pathname;
// No cap on connections (as the gateway): 400 concurrent streams must not wait for one another.
const pool = new Pool(upstream.origin, { keepAliveTimeout: 60_000, pipelining: 1 });
const JSON_HEADERS = { 'content-type': 'application/json' };

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

const server = createServer((req, res) => {
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
    if (values.model) body.model = values.model;
    pool.dispatch(
      {
        path: `${basePath}${req.url?.replace(/^\/v1/, '') ?? ''}`,
        method: 'POST',
        headers: JSON_HEADERS,
        body: JSON.stringify(body),
      },
      relay(res),
    );
  });
});

server.listen(Number(values.port), values.host, () => {
  const { address, port } = server.address() as AddressInfo;
  process.stdout.write(`bare-proxy listening on http://${address}:${port}\n`);
});
process.once('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  void pool.close().finally(() => process.exit(0));
});
