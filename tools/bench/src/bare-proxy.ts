/**
 * The Node floor of the benchmark (target `node-floor`): the least a Node proxy in front of the
 * same upstream can do, written as fast as Node allows so the floor is honest. Node `http` server,
 * one undici `Pool` to the upstream (keep-alive, no cap on connections as in the gateway, no pipelining), and per request:
 * read the body, `JSON.parse`, rename `model`, `JSON.stringify`, POST it upstream through
 * `Pool.dispatch` (no response `Readable`), relay status, content type and body back with
 * `res.write` chunk by chunk (streams included, backpressure by pausing the upstream). No auth, no
 * validation, no admission, no logging, no metrics: what the gateway adds on top of this is its own cost.
 * The forwarding is `floor-proxy.ts`, shared with the express floor (`express-floor.ts`).
 *
 * Design measured on 2 cores at c=64 (CPU of the proxy per request, same run): `Agent` +
 * `request` + `stream.pipeline` ≈ 140 µs; `Pool` + `request` + `pipeline` ≈ 145 µs; `Pool` +
 * `request` + `res.write` ≈ 70 µs; `Pool` + `dispatch` + `res.write` ≈ 60–70 µs (kept). See
 * README "Benchmarks".
 *
 * `node dist/tools/bench/bare-proxy.js --upstream http://127.0.0.1:PORT/v1 [--model NAME]
 * [--port 0] [--host 127.0.0.1]`; prints `bare-proxy listening on http://HOST:PORT` when ready.
 */
import { createServer } from 'node:http';
import { floorProxy } from './floor-proxy';

const proxy = floorProxy('bare-proxy');
// Every path is forwarded: there is no routing at all.
proxy.serve(createServer(proxy.forward));
