import { parseArgs } from 'node:util';
import { startFakeUpstream } from './fake-upstream';
import { parseKnobFlags } from './knobs';
import { parseEngineFlags } from './engine';

/**
 * CLI for benchmarks and the demo: `node dist/tools/fake-upstream/main.js [--port N] [--host H] [--name NAME] [--models a,b] [--journal] [--knob name=value ...] [--engine] [--engine-* N ...]`
 * (`--help` prints {@link USAGE}).
 * `--journal` keeps the call journal (`GET /__calls`: every inference call's model, `tag` knob, start and end, ms).
 * Prints `fake-upstream listening on http://HOST:PORT/v1` once listening; SIGTERM/SIGINT close it and exit 0.
 */
/** What `--help` prints: the flags, and where the per-request knobs are described. */
const USAGE = `usage: node dist/tools/fake-upstream/main.js [--port N] [--host H] [--name NAME] [--models a,b] [--journal] [--knob name=value ...] [--engine] [--engine-* N ...]
  --port      port to listen on (0: a free one; default 0)
  --host      address to bind (default 127.0.0.1)
  --name      name sent in every answer's x-fake-upstream header (default fake-upstream)
  --models    model ids GET /v1/models lists (comma-separated)
  --journal   keep the call journal: GET /__calls lists every inference call (model, tag, start, end, ms)
  --knob      a default knob for every request, e.g. --knob delay_ms=2000 --knob chunks=20 --knob chunk_gap_ms=100
              (so queues form without a client setting knobs); a request's own knobs win
  --engine    model an inference engine (KV prefix cache, batch, prefill and decode time, GET /metrics);
              any --engine-* flag also turns it on. Off by default.
  --engine-cache-blocks N           KV cache size in blocks, LRU (default 2048)
  --engine-block-tokens N           tokens per block; a token is 4 bytes of prompt text (default 512)
  --engine-prefill-ms-per-token MS  prefill time per uncached prompt token, idle engine (default 0.05)
  --engine-decode-ms-per-token MS   decode time per output token after the first (default 10)
  --engine-overhead-ms MS           fixed time before every first token (default 5)
  --engine-max-batch N              requests running at once; the rest wait (default 16)
Per-request behaviour (delays, chunks, failures, usage, ...) is set by knobs: a header x-fake-<knob> or
a body member "fake": { "<knob>": value }. The knobs are listed in tools/fake-upstream/README.md.
`;

async function main(): Promise<void> {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    process.stdout.write(USAGE);
    return;
  }
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: '0' },
      host: { type: 'string', default: '127.0.0.1' },
      name: { type: 'string', default: 'fake-upstream' },
      models: { type: 'string' },
      journal: { type: 'boolean', default: false },
      knob: { type: 'string', multiple: true, default: [] },
      engine: { type: 'boolean', default: false },
      'engine-cache-blocks': { type: 'string' },
      'engine-block-tokens': { type: 'string' },
      'engine-prefill-ms-per-token': { type: 'string' },
      'engine-decode-ms-per-token': { type: 'string' },
      'engine-overhead-ms': { type: 'string' },
      'engine-max-batch': { type: 'string' },
    },
    strict: true,
  });
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`--port must be an integer 0-65535, got ${values.port}`);
  const upstream = await startFakeUpstream({
    port,
    host: values.host,
    name: values.name,
    models: values.models?.split(',').filter(Boolean),
    journal: values.journal,
    knobs: parseKnobFlags(values.knob),
    engine: parseEngineFlags(values.engine, values),
  });
  process.stdout.write(`fake-upstream listening on ${upstream.url}\n`);
  const stop = () =>
    void upstream.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(
    `fake-upstream: ${err instanceof Error ? err.message : String(err)} (--help lists the options)\n`,
  );
  process.exit(2);
});
