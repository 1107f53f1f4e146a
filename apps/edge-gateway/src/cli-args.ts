import { isRedisUrl, parseListenAddress, redactUrl } from '@iop/validate';
import { parseArgs } from 'node:util';

/** The gateway's command line, parsed (see `USAGE`). */
export type GatewayCommand =
  | { command: 'validate'; file: string }
  | { command: 'serve'; config: string; listen?: string; redis?: string }
  | { command: 'help' };

export const USAGE = `usage:
  main.js [serve] --config FILE [--listen HOST:PORT] [--redis URL]
  main.js validate FILE

  serve            run the gateway (default command)
  --config FILE    edge.yaml to load (required)
  --listen         overrides gateway.listen
  --redis URL      selects the redis queue backend at URL (redis://, rediss:// for TLS, or
                   redis+sentinel://[user:password@]host:26379[,host2:26379...]/<master name>),
                   even over queue.backend: memory;
                   beats REDIS_URL, which beats queue.redis_url. A command line is readable by
                   every local user (ps): put a password in REDIS_URL or queue.redis_url instead
                   (a --redis URL with one is warned of at start)
  validate FILE    check a config file: prints every problem and exits 1, or a summary and exits 0

environment:
  REDIS_URL        like --redis (a redis://, rediss:// or redis+sentinel:// URL; empty = unset):
                   selects the redis backend, even over queue.backend: memory
  LOG_LEVEL        pino level (default info); the startup log says which queue backend runs and why
  IOP_SHUTDOWN_GRACE_MS  longest SIGTERM waits for in-flight requests, in ms (default 30000)
  OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_*  tracing over OTLP/HTTP (README "Metrics, dashboard and traces")
  a bad value of LOG_LEVEL, IOP_SHUTDOWN_GRACE_MS or OTEL_BSP_SCHEDULE_DELAY exits 2, naming it`;

/** @throws Error with a usage message for unknown flags or a missing --config/FILE. */
export function parseGatewayArgs(argv: string[]): GatewayCommand {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: 'string', short: 'c' },
      listen: { type: 'string' },
      redis: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return { command: 'help' };
  const [command = 'serve', ...rest] = positionals;
  if (command === 'validate') {
    const file = rest[0] ?? values.config;
    if (!file) throw new Error('validate needs a file: main.js validate edge.yaml');
    return { command: 'validate', file };
  }
  if (command !== 'serve') throw new Error(`unknown command "${command}"`);
  if (!values.config) throw new Error('serve needs --config FILE (e.g. --config examples/edge.yaml)');
  checkAddresses(values.listen, values.redis);
  return { command: 'serve', config: values.config, listen: values.listen, redis: values.redis };
}

/** @throws Error naming the flag when `--listen` is not host:port or `--redis` not a Redis URL (`isRedisUrl`). */
function checkAddresses(listen: string | undefined, redis: string | undefined): void {
  if (listen !== undefined) {
    try {
      parseListenAddress(listen);
    } catch (err) {
      throw new Error(`--listen: ${(err as Error).message}`);
    }
  }
  if (redis !== undefined && !isRedisUrl(redis))
    throw new Error(
      `--redis: "${redactUrl(redis)}" is not a redis://, rediss:// or redis+sentinel:// URL (percent-encode "/", "?" or "#" in a password)`,
    );
}
