import { parseArgs } from 'node:util';

/** The exporter's command line, parsed (see `USAGE`). */
export type ExporterCommand = { command: 'serve'; config: string; listen?: string; redis?: string } | { command: 'help' };

export const USAGE = `usage:
  main.js --config FILE [--listen HOST:PORT] [--redis URL]

  --config FILE    edge.yaml to load (required; the same file as the gateways)
  --listen         overrides status.listen (default 127.0.0.1:9464)
  --redis          overrides queue.redis_url (the gateways' Redis; REDIS_URL works too)

serves GET /status, GET /metrics, GET /healthz and a dashboard on GET /;
POSTs the snapshot to status.push_url every status.interval_ms when set.`;

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
  return { command: 'serve', config: values.config, listen: values.listen, redis: values.redis };
}

/** Splits `host:port` (IPv6 in brackets) into its parts. @throws Error when it is not HOST:PORT. */
export function splitHostPort(listen: string): { host: string; port: number } {
  const at = listen.lastIndexOf(':');
  const host = listen.slice(0, at).replace(/^\[|\]$/g, '');
  const port = Number(listen.slice(at + 1));
  if (at <= 0 || !Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`"${listen}" is not HOST:PORT`);
  return { host, port };
}
