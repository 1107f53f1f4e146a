import { parseArgs } from 'node:util';
import { startFakeUpstream } from './fake-upstream';

/**
 * CLI for benchmarks: `node dist/tools/fake-upstream/main.js [--port N] [--host H] [--name NAME] [--models a,b] [--journal]`.
 * `--journal` keeps the call journal (`GET /__calls`: every inference call's model, `tag` knob, start and end, ms).
 * Prints `fake-upstream listening on http://HOST:PORT/v1` once listening; SIGTERM/SIGINT close it and exit 0.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: '0' },
      host: { type: 'string', default: '127.0.0.1' },
      name: { type: 'string', default: 'fake-upstream' },
      models: { type: 'string' },
      journal: { type: 'boolean', default: false },
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
  process.stderr.write(`fake-upstream: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(2);
});
