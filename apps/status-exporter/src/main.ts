/**
 * Composition root of the status exporter (docs/architecture.md, "Layering"; README "Production layout"): parses
 * the command line, loads and validates edge.yaml (refuses to start on an invalid file or the
 * memory backend), starts the exporter, and closes it cleanly on SIGTERM/SIGINT.
 */
import { exporterEnvironmentSchema, parseListenAddress, readProcessStart } from '@iop/validate';
import pino from 'pino';
import { parseExporterArgs, USAGE, type ExporterCommand } from './cli-args';
import { EXPORTER_CONFIG_LOAD, ExporterRefusal, startExporter, type RunningExporter } from './exporter';
import { flushLogs } from '@iop/validate';

async function main(): Promise<number> {
  let cmd: ExporterCommand;
  try {
    cmd = parseExporterArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (cmd.command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const start = readProcessStart(exporterEnvironmentSchema, { ...cmd, load: EXPORTER_CONFIG_LOAD });
  if ('exitCode' in start) return start.exitCode;
  const { environment, config } = start;
  const logger = pino({ level: environment.LOG_LEVEL, base: { service: 'status-exporter' } });
  // A stdout whose reader is gone must not crash the process nor keep it from exiting.
  process.stdout.on('error', () => undefined);

  let listen: { host: string; port: number };
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
  // The signal handlers are in place before the line that says the exporter listens: a SIGTERM
  // sent as soon as it is read drains instead of killing the process with the default action.
  const stopped = new Promise<number>((resolve) => {
    let stopping = false;
    const stop = async (signal: string) => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, 'shutting down');
      await exporter.close();
      logger.info('stopped');
      await flushLogs(logger);
      resolve(0);
    };
    process.on('SIGHUP', () => void exporter.reload());
    process.once('SIGTERM', () => void stop('SIGTERM'));
    process.once('SIGINT', () => void stop('SIGINT'));
  });
  // One line on stdout for scripts and tests that wait for the port.
  process.stdout.write(`status-exporter listening on ${exporter.url}\n`);
  return stopped;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`status-exporter failed: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  },
);
