/**
 * Entry point of the gateway (docs/architecture.md, "Layering"): reads the command line, the
 * environment and edge.yaml, composes the gateway (`compose/compose-gateway.ts`: everything with
 * I/O is created there and nowhere else), listens, and drains on SIGTERM/SIGINT. The process's
 * start-up, its one close list (run on every way out: the drain, a listen failure, a fatal
 * error), its signal handling and its listen are `@iop/runtime`'s, shared with the status exporter.
 */
import {
  createProcessLogger,
  gatewayEnvironmentSchema,
  listenOrStop,
  readCommandLine,
  readProcessStart,
  runMain,
  stopOnSignals,
  type CloseList,
} from '@iop/runtime';
import { formatProblems, loadConfigFile, parseListenAddress } from '@iop/validate';
import { parseGatewayArgs, USAGE } from './cli-args';
import { composeGateway, type ServeCommand } from './compose/compose-gateway';
import { drainServer, serverListening } from './compose/gateway-server';

async function main(toClose: CloseList): Promise<number> {
  const cmd = readCommandLine(parseGatewayArgs, USAGE);
  if ('exitCode' in cmd) return cmd.exitCode;
  if (cmd.command === 'validate') return validate(cmd.file);
  return serve(cmd, toClose);
}

/** `main.js validate FILE`: every problem of the file and exit 1, or a one-line summary and exit 0. */
function validate(file: string): number {
  const result = loadConfigFile(file);
  if (!result.ok) {
    process.stderr.write(`${formatProblems(file, result.problems)}\n${result.problems.length} problem(s) in ${file}\n`);
    return 1;
  }
  const { config } = result;
  const providers = config.nodes.reduce((n, node) => n + node.providers.length, 0);
  process.stdout.write(
    `${file}: valid (${count(config.nodes.length, 'node')}, ${count(providers, 'provider')}, ${count(config.routes.length, 'route')}, sha256 ${result.hash.slice(0, 12)})\n`,
  );
  return 0;
}

/** "1 node", "2 nodes". */
function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

/** `main.js serve`: runs the gateway until SIGTERM or SIGINT; @returns the exit code. */
async function serve(cmd: ServeCommand, toClose: CloseList): Promise<number> {
  const start = readProcessStart(gatewayEnvironmentSchema, cmd);
  if ('exitCode' in start) return start.exitCode;
  const { environment, config: initial } = start;
  const logger = createProcessLogger('edge-gateway', environment.LOG_LEVEL);
  const gateway = await composeGateway(cmd, start, logger, toClose);
  if (!gateway) return 2;
  const { server, queue, shutdown } = gateway;

  const { host, port } = parseListenAddress(cmd.listen ?? initial.gateway.listen);
  if (!(await listenOrStop(server, { host, port }, logger, toClose))) return 1;
  const bound = serverListening(server, toClose, `${host}:${port}`);
  logger.info({ listen: bound, queue: queue.backend, nodes: initial.nodes.length }, 'edge-gateway listening');
  // The signal handlers are in place before the line that says the gateway listens: a SIGTERM
  // sent as soon as it is read drains instead of killing the process with the default action.
  const stopped = stopOnSignals({
    logger,
    toClose,
    stoppingMessage: 'shutting down: no new connections, waiting for in-flight requests',
    drain: () => drainServer(server, shutdown, environment.IOP_SHUTDOWN_GRACE_MS),
  });
  // One line on stdout for scripts and tests that wait for the port.
  process.stdout.write(`edge-gateway listening on http://${bound}\n`);
  return stopped;
}

runMain('edge-gateway', main);
