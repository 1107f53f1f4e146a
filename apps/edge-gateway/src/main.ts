/**
 * Entry point of the gateway (docs/architecture.md, "Layering"): reads the command line, the
 * environment and edge.yaml, composes the gateway (`compose/compose-gateway.ts`: everything with
 * I/O is created there and nowhere else), listens, and drains on SIGTERM/SIGINT. The process's
 * start-up, its one close list (run on every way out: the drain, a listen failure, a fatal
 * error), its signal handling and its listen are `@iop/runtime`'s, shared with the status exporter.
 */
import {
  announceListening,
  gatewayEnvironmentSchema,
  listenOrStop,
  runMain,
  startService,
  type CloseList,
} from '@iop/runtime';
import { configDigest, formatProblems, loadConfigFile, parseListenAddress } from '@iop/validate';
import { parseGatewayArgs, USAGE, type GatewayCommand } from './cli-args';
import { composeGateway, type ServeCommand } from './compose/compose-gateway';
import { drainServer, serverListening } from './compose/gateway-server';

/** `main.js validate FILE` or `main.js serve`; `--help` and a bad command line end in `runMain`. */
async function main(cmd: Exclude<GatewayCommand, { command: 'help' }>, toClose: CloseList): Promise<number> {
  if (cmd.command === 'validate') return validate(cmd.file);
  return serve(cmd, toClose);
}

/**
 * `main.js validate FILE`: every problem of the file and exit 1, or a one-line summary and exit 0.
 * The summary names the config's `config_hash` (`configDigest`, first 12 hex digits: what `/status`
 * and `iop_edge_config_info{hash}` show for this file in this environment) and, labelled apart, the
 * sha256 of the file's bytes (README "Configuration").
 */
function validate(file: string): number {
  const result = loadConfigFile(file);
  if (!result.ok) {
    process.stderr.write(`${formatProblems(file, result.problems)}\n${result.problems.length} problem(s) in ${file}\n`);
    return 1;
  }
  const { config } = result;
  const providers = config.nodes.reduce((n, node) => n + node.providers.length, 0);
  process.stdout.write(
    `${file}: valid (${count(config.nodes.length, 'node')}, ${count(providers, 'provider')}, ${count(config.routes.length, 'route')}; config_hash ${configDigest(config).slice(0, 12)}, file sha256 ${result.hash.slice(0, 12)})\n`,
  );
  return 0;
}

/** "1 node", "2 nodes". */
function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

/** `main.js serve`: runs the gateway until SIGTERM or SIGINT; @returns the exit code. */
async function serve(cmd: ServeCommand, toClose: CloseList): Promise<number> {
  const start = startService('edge-gateway', gatewayEnvironmentSchema, cmd);
  if ('exitCode' in start) return start.exitCode;
  const { environment, config: initial, logger } = start;
  const gateway = await composeGateway(cmd, start, logger, toClose);
  if (!gateway) return 2;
  const { server, queue, shutdown } = gateway;

  const { host, port } = parseListenAddress(cmd.listen ?? initial.gateway.listen);
  if (!(await listenOrStop(server, { host, port }, logger, toClose))) return 1;
  const bound = serverListening(server, toClose, `${host}:${port}`);
  logger.info({ listen: bound, queue: queue.backend, nodes: initial.nodes.length }, 'edge-gateway listening');
  return announceListening('edge-gateway', `http://${bound}`, {
    logger,
    toClose,
    stoppingMessage: 'shutting down: no new connections, waiting for in-flight requests',
    drain: () => drainServer(server, shutdown, environment.IOP_SHUTDOWN_GRACE_MS),
  });
}

runMain('edge-gateway', { parse: parseGatewayArgs, usage: USAGE }, main);
