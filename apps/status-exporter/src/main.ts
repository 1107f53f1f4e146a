/**
 * Composition root of the status exporter (docs/architecture.md, "Layering"; README "Production layout"): parses
 * the command line, loads and validates edge.yaml (refuses to start on an invalid file or the
 * memory backend), starts the exporter, and closes it cleanly on SIGTERM/SIGINT. The process's
 * start-up, close list and signal handling are `@iop/runtime`'s, shared with the gateway.
 */
import {
  createProcessLogger,
  exporterEnvironmentSchema,
  readCommandLine,
  readProcessStart,
  runMain,
  stopOnSignals,
  type CloseList,
} from '@iop/runtime';
import { parseListenAddress, type ListenAddress } from '@iop/validate';
import { parseExporterArgs, USAGE } from './cli-args';
import { EXPORTER_CONFIG_LOAD, ExporterRefusal, startExporter, type RunningExporter } from './exporter';

async function main(toClose: CloseList): Promise<number> {
  const cmd = readCommandLine(parseExporterArgs, USAGE);
  if ('exitCode' in cmd) return cmd.exitCode;
  const start = readProcessStart(exporterEnvironmentSchema, { ...cmd, load: EXPORTER_CONFIG_LOAD });
  if ('exitCode' in start) return start.exitCode;
  const { environment, config } = start;
  const logger = createProcessLogger('status-exporter', environment.LOG_LEVEL);

  let listen: ListenAddress;
  try {
    listen = parseListenAddress(cmd.listen ?? config.status.listen);
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  let exporter: RunningExporter;
  try {
    exporter = await startExporter({
      config,
      configHash: start.hash,
      configFile: cmd.config,
      env: process.env,
      redis: cmd.redis,
      ...listen,
      logger,
    });
  } catch (err) {
    if (err instanceof ExporterRefusal) {
      process.stderr.write(`${err.message}\n`);
      return 1;
    }
    process.stderr.write(`cannot start on ${listen.host}:${listen.port}: ${(err as Error).message}\n`);
    return 1;
  }
  toClose.add('exporter', () => exporter.close());
  // The signal handlers are in place before the line that says the exporter listens: a SIGTERM
  // sent as soon as it is read drains instead of killing the process with the default action.
  process.on('SIGHUP', () => void exporter.reload());
  const stopped = stopOnSignals({ logger, toClose });
  // One line on stdout for scripts and tests that wait for the port.
  process.stdout.write(`status-exporter listening on ${exporter.url}\n`);
  return stopped;
}

runMain('status-exporter', main);
