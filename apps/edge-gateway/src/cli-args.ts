import { parseArgs } from 'node:util';

/** The gateway's command line, parsed (see `USAGE`). */
export type GatewayCommand =
  | { command: 'validate'; file: string }
  | { command: 'serve'; config: string; listen?: string; redis?: string; demoUpstream?: string }
  | { command: 'help' };

export const USAGE = `usage:
  main.js [serve] --config FILE [--listen HOST:PORT] [--redis URL] [--demo-upstream HOST:PORT]
  main.js validate FILE

  serve            run the gateway (default command)
  --config FILE    edge.yaml to load (required)
  --listen         overrides gateway.listen
  --redis          overrides queue.redis_url (and selects the redis backend)
  --demo-upstream  also start the bundled OpenAI-compatible demo upstream on HOST:PORT
  validate FILE    check a config file: prints every problem and exits 1, or a summary and exits 0`;

/** @throws Error with a usage message for unknown flags or a missing --config/FILE. */
export function parseGatewayArgs(argv: string[]): GatewayCommand {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: 'string', short: 'c' },
      listen: { type: 'string' },
      redis: { type: 'string' },
      'demo-upstream': { type: 'string' },
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
  return { command: 'serve', config: values.config, listen: values.listen, redis: values.redis, demoUpstream: values['demo-upstream'] };
}

/** Splits `host:port` (IPv6 in brackets) into its parts. @throws Error when the port is not a number. */
export function splitHostPort(listen: string): { host: string; port: number } {
  const at = listen.lastIndexOf(':');
  const host = listen.slice(0, at).replace(/^\[|\]$/g, '');
  const port = Number(listen.slice(at + 1));
  if (at <= 0 || !Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`"${listen}" is not HOST:PORT`);
  return { host, port };
}
