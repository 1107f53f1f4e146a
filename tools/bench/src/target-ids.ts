/** The systems the benchmark compares, each in front of the same fake upstream process (README "Benchmarks"). */
export type TargetId =
  | 'direct'
  | 'node-floor'
  | 'express-floor'
  | 'memory'
  | 'memory-warn'
  | 'memory-semi4'
  | 'bullmq-1'
  | 'bullmq-3'
  | 'portkey';

/** Every target, in report order. */
export const TARGET_IDS: readonly TargetId[] = [
  'direct',
  'node-floor',
  'express-floor',
  'memory',
  'memory-warn',
  'memory-semi4',
  'bullmq-1',
  'bullmq-3',
  'portkey',
];

/** The V8 flag the README recommends for production gateways: a small young generation keeps RSS low. */
export const RECOMMENDED_NODE_ARGS = ['--max-semi-space-size=4'];

/**
 * How the Node floor is built and why (measured on 2 cores at c=64, CPU of the proxy per request in
 * the same run), for the report's Systems table.
 */
export const FLOOR_DESIGN_NOTE =
  'design: undici Pool (no cap on connections) + dispatch, res.write per chunk, ≈ 60–70 µs CPU per request; ' +
  'Agent or Pool + request + stream.pipeline took ≈ 140 µs, Pool + request + res.write ≈ 70 µs';

/** What each target is, for the report. */
export const TARGET_LABELS: Record<TargetId, string> = {
  direct: 'direct to upstream (floor)',
  'node-floor': 'bare Node proxy: http + undici Pool.dispatch, parse JSON, rename model, write back (the Node floor)',
  'express-floor': 'the Node floor behind express 5 routing (one app.post route, x-powered-by and etag off)',
  memory: 'iop-edge, memory backend',
  'memory-warn': 'iop-edge, memory backend, LOG_LEVEL=warn (no access log)',
  'memory-semi4': 'iop-edge, memory backend, node --max-semi-space-size=4 (README recommendation)',
  'bullmq-1': 'iop-edge, Redis backend, 1 replica',
  'bullmq-3': 'iop-edge, Redis backend, 3 replicas',
  portkey: 'Portkey gateway (npm)',
};

/** Short names of the targets, for goals and table headers. */
export const TARGET_SHORT: Record<TargetId, string> = {
  direct: 'direct',
  'node-floor': 'bare Node proxy',
  'express-floor': 'express floor',
  memory: 'memory backend',
  'memory-warn': 'memory, LOG_LEVEL=warn',
  'memory-semi4': 'memory backend, --max-semi-space-size=4',
  'bullmq-1': 'Redis backend, 1 replica',
  'bullmq-3': 'Redis backend, 3 replicas',
  portkey: 'Portkey',
};
