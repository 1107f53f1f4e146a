import { isRedisUrl, parseListenAddress, redactUrl } from '@iop/validate';
import { parseArgs } from 'node:util';

/** The exporter's command line, parsed (see `USAGE`). */
export type ExporterCommand =
  { command: 'serve'; config: string; listen?: string; redis?: string } | { command: 'help' };

export const USAGE = `usage:
  main.js --config FILE [--listen HOST:PORT] [--redis URL]

  --config FILE    edge.yaml to load (required; the same file as the gateways)
  --listen         overrides status.listen (default 127.0.0.1:9464)
  --redis URL      the gateways' Redis: selects the redis backend at URL (redis://, rediss://
                   for TLS, or redis+sentinel://[user:password@]host:26379[,host2:26379...]/<master
                   name>), even over queue.backend: memory; beats REDIS_URL, which beats
                   queue.redis_url. A command
                   line is readable by every local user (ps): put a password in REDIS_URL or
                   queue.redis_url instead (a --redis URL with one is warned of at start)

serves GET /status, GET /metrics, GET /healthz and a dashboard on GET /;
POSTs the snapshot to status.push_url every status.interval_ms when set.

environment:
  REDIS_URL        like --redis (a redis://, rediss:// or redis+sentinel:// URL; empty = unset)
  LOG_LEVEL        pino level (default info); the startup log says which Redis is read and why;
                   another value exits 2, naming it`;

/** @throws Error with a usage message for unknown flags or a missing --config. */
export function parseExporterArgs(argv: string[]): ExporterCommand {
  const { values } = parseArgs({
    args: argv,
    allowPositionals: false,
    options: {
      config: { type: 'string', short: 'c' },
      listen: { type: 'string' },
      redis: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return { command: 'help' };
  if (!values.config) throw new Error('--config FILE is required (e.g. --config examples/edge.yaml)');
  if (values.listen !== undefined) parseListenAddress(values.listen);
  if (values.redis !== undefined && !isRedisUrl(values.redis))
    throw new Error(
      `--redis: "${redactUrl(values.redis)}" is not a redis://, rediss:// or redis+sentinel:// URL (percent-encode "/", "?" or "#" in a password)`,
    );
  return { command: 'serve', config: values.config, listen: values.listen, redis: values.redis };
}
