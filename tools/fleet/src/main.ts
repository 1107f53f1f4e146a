/**
 * `npm run fleet`: a real local fleet (README "Running a fleet"): Redis, two fake GPU servers,
 * 3 gateway replicas and the status exporter on deploy/local/edge.yaml (or `--config FILE`), behind
 * HAProxy with deploy/haproxy/haproxy.cfg, every process supervised. Prints the one URL to use on
 * stdout; Ctrl-C stops everything.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { describeServed } from './fleet-config';
import { FLEET_CONFIG, startLocalFleet, WORKSPACE_ROOT, type LocalFleet } from './local-fleet';
import { fleetPorts, type FleetPorts } from './fleet-ports';

const USAGE = `usage: npm run fleet -- [--config FILE] [--port 8080] [--host 127.0.0.1] [--exporter-port 9464]
                            [--stats-port 8404] [--redis redis://HOST:PORT] [--log-dir tmp/fleet]

  --config FILE    the edge.yaml the gateways and the exporter run (default ${FLEET_CONFIG}); checked
                   first. The fleet sets REDIS_URL and, for the two fake GPU servers it starts,
                   FLEET_UPSTREAM_A and FLEET_UPSTREAM_B; any other \${VAR} comes from your environment.
                   A relative path is read from the directory you ran npm in.
  --port           HAProxy's port for clients (default FLEET_PORT, else 8080)
  --host           address HAProxy binds (default 127.0.0.1)
  --exporter-port  status exporter: dashboard, /status, /metrics (default FLEET_EXPORTER_PORT, else 9464)
  --stats-port     HAProxy's stats page (default FLEET_STATS_PORT, else 8404)
  --redis URL      use this Redis instead of starting redis-server on a free port
  --log-dir DIR    one log file per process (default tmp/fleet)

A process that crashes (or is killed) is restarted after 1 s, the wait doubling with each crash in
a row up to 30 s; each exit and restart is logged here.
signals: SIGINT/SIGTERM stop the fleet (gateways drain first); SIGUSR2 restarts the replicas one
by one, as a rolling update does: each is taken out of HAProxy, gets SIGTERM, drains, starts again
and is put back (a replica that is not running is started).`;

async function main(): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        config: { type: 'string' },
        port: { type: 'string' },
        host: { type: 'string', default: '127.0.0.1' },
        'exporter-port': { type: 'string' },
        'stats-port': { type: 'string' },
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
  let ports: FleetPorts;
  try {
    ports = fleetPorts(values, process.env);
  } catch (err) {
    process.stderr.write(`fleet: ${(err as Error).message}\n`);
    return 2;
  }
  const logDir = path.resolve(values['log-dir']);
  let fleet: LocalFleet;
  try {
    fleet = await startLocalFleet({
      port: ports.port,
      bindHost: values.host,
      exporterPort: ports.exporterPort,
      statsPort: ports.statsPort,
      redisUrl: values.redis,
      // npm runs scripts from the workspace root; INIT_CWD is where the operator typed the command.
      config: values.config && path.resolve(process.env['INIT_CWD'] ?? process.cwd(), values.config),
      logDir,
    });
  } catch (err) {
    process.stderr.write(`fleet: ${(err as Error).message}\n`);
    return 1;
  }
  process.stderr.write(
    [
      `fleet: config ${fleet.configFile}`,
      `fleet: redis ${fleet.redisUrl}`,
      ...fleet.upstreams.map((u) => `fleet: fake GPU server ${u.origin} (${describeServed(u.providers, u.variable)})`),
      ...fleet.replicas.map((r) => `fleet: gateway ${r.name} http://127.0.0.1:${r.port} (pid ${r.process.pid})`),
      `fleet: status exporter ${fleet.exporterUrl}/ (dashboard), /status, /metrics`,
      `fleet: HAProxy stats ${fleet.statsUrl}/`,
      `fleet: logs in ${logDir}`,
      `fleet: Ctrl-C stops; kill -USR2 ${process.pid} restarts the replicas one by one; crashed processes restart by themselves`,
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
      void fleet.rollingRestart().finally(() => (rolling = false));
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
