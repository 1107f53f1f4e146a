/**
 * `npm run fleet`: a real local fleet (README "Running a fleet"): Redis, two fake GPU servers,
 * 3 gateway replicas and the status exporter on deploy/local/edge.yaml, behind HAProxy with
 * deploy/haproxy/haproxy.cfg. Prints the one URL to use on stdout; Ctrl-C stops everything.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startLocalFleet, WORKSPACE_ROOT, type LocalFleet } from './local-fleet';

const USAGE = `usage: npm run fleet -- [--port 8080] [--host 127.0.0.1] [--exporter-port 9464] [--stats-port 8404]
                            [--redis redis://HOST:PORT] [--log-dir tmp/fleet]

  --port           HAProxy's port for clients (default 8080)
  --host           address HAProxy binds (default 127.0.0.1)
  --exporter-port  status exporter: dashboard, /status, /metrics (default 9464)
  --stats-port     HAProxy's stats page (default 8404)
  --redis URL      use this Redis instead of starting redis-server on a free port
  --log-dir DIR    one log file per process (default tmp/fleet)

signals: SIGINT/SIGTERM stop the fleet (gateways drain first); SIGUSR2 restarts the replicas one
by one with SIGTERM, as a rolling update does.`;

async function main(): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        port: { type: 'string', default: '8080' },
        host: { type: 'string', default: '127.0.0.1' },
        'exporter-port': { type: 'string', default: '9464' },
        'stats-port': { type: 'string', default: '8404' },
        redis: { type: 'string' },
        'log-dir': { type: 'string', default: path.join(WORKSPACE_ROOT, 'tmp/fleet') },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const port = (name: 'port' | 'exporter-port' | 'stats-port') => {
    const n = Number(values[name]);
    if (!Number.isInteger(n) || n < 1 || n > 65535)
      throw new Error(`--${name} must be a port number, got ${values[name]}`);
    return n;
  };
  const logDir = path.resolve(values['log-dir']);
  let fleet: LocalFleet;
  try {
    fleet = await startLocalFleet({
      port: port('port'),
      bindHost: values.host,
      exporterPort: port('exporter-port'),
      statsPort: port('stats-port'),
      redisUrl: values.redis,
      logDir,
    });
  } catch (err) {
    process.stderr.write(`fleet: ${(err as Error).message}\n`);
    return 1;
  }
  process.stderr.write(
    [
      `fleet: redis ${fleet.redisUrl}`,
      ...fleet.upstreams.map(
        (u) => `fleet: fake GPU server ${u.origin} (provider ${u.providerId}, max_concurrency ${u.maxConcurrency})`,
      ),
      ...fleet.replicas.map((r) => `fleet: gateway ${r.name} http://127.0.0.1:${r.port} (pid ${r.process.pid})`),
      `fleet: status exporter ${fleet.exporterUrl}/ (dashboard), /status, /metrics`,
      `fleet: HAProxy stats ${fleet.statsUrl}/`,
      `fleet: logs in ${logDir}`,
      `fleet: Ctrl-C stops; kill -USR2 ${process.pid} restarts the replicas one by one`,
      '',
    ].join('\n'),
  );
  // The one URL, alone on stdout.
  process.stdout.write(`${fleet.url}\n`);

  return new Promise<number>((resolve) => {
    let rolling = false;
    process.on('SIGUSR2', () => {
      if (rolling) return;
      rolling = true;
      void (async () => {
        for (let i = 0; i < fleet.replicas.length; i++) {
          process.stderr.write(`fleet: rolling restart: ${fleet.replicas[i].name}\n`);
          await fleet.restartReplica(i);
        }
        process.stderr.write('fleet: rolling restart done\n');
      })()
        .catch((err: Error) => process.stderr.write(`fleet: rolling restart failed: ${err.message}\n`))
        .finally(() => (rolling = false));
    });
    const stop = () => {
      process.stderr.write('fleet: stopping\n');
      void fleet.close().then(() => resolve(0));
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`fleet: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  },
);
