/**
 * The Node floor of the benchmark (target `node-floor`): the least a Node proxy in front of the
 * same upstream can do. Node `http` server, one undici Agent (keep-alive), and per request: read
 * the body, `JSON.parse`, rename `model`, `JSON.stringify`, POST it upstream, pipe status,
 * content type and body back (streams included, chunk by chunk). No auth, no validation, no
 * admission, no logging, no metrics: what the gateway adds on top of this is its own cost.
 *
 * `node dist/tools/bench/bare-proxy.js --upstream http://127.0.0.1:PORT/v1 [--model NAME]
 * [--port 0] [--host 127.0.0.1]`; prints `bare-proxy listening on http://HOST:PORT` when ready.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';

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
const upstream = values.upstream.replace(/\/$/, '');
const dispatcher = new Agent({ keepAliveTimeout: 60_000, connections: 256 });

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    let body: { model?: unknown };
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { model?: unknown };
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"invalid JSON"}}');
      return;
    }
    // The rename a gateway does (public model name → the upstream's), so the body is re-serialised.
    if (values.model) body.model = values.model;
    request(`${upstream}${req.url?.replace(/^\/v1/, '') ?? ''}`, {
      method: 'POST',
      dispatcher,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }).then(
      (up) => {
        res.writeHead(up.statusCode, { 'content-type': String(up.headers['content-type'] ?? 'application/json') });
        pipeline(up.body, res, () => undefined);
      },
      (err: Error) => {
        res
          .writeHead(502, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: { message: err.message } }));
      },
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
  void dispatcher.close().finally(() => process.exit(0));
});
