/**
 * The express floor of the benchmark (target `express-floor`): the Node floor (`bare-proxy.ts`, the
 * same forwarding from `floor-proxy.ts`) with express 5 routing in front, as the gateway has it: one
 * `app.post('/v1/chat/completions', …)` route, `x-powered-by` and `etag` off, no middleware, no body
 * parser (the handler reads the body stream itself). What it costs over `node-floor` is what express
 * alone costs a request; what the gateway costs over it is the gateway's own work (README "Benchmarks").
 * Any other method or path gets express's default 404.
 *
 * `node dist/tools/bench/express-floor.js --upstream http://127.0.0.1:PORT/v1 [--model NAME]
 * [--port 0] [--host 127.0.0.1]`; prints `express-floor listening on http://HOST:PORT` when ready.
 */
import express from 'express';
import { createServer } from 'node:http';
import { floorProxy } from './floor-proxy';

const proxy = floorProxy('express-floor');
const app = express();
app.disable('x-powered-by');
app.disable('etag');
app.post('/v1/chat/completions', (req, res) => proxy.forward(req, res));
proxy.serve(createServer(app));
