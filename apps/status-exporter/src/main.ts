/**
 * Composition root of the status exporter (docs/architecture.md, "Layering"; README "Production layout"): parses
 * the command line, loads and validates edge.yaml (refuses to start on an invalid file or the
 * memory backend), starts the exporter, and closes it cleanly on SIGTERM/SIGINT. The process's
 * start-up, close list and signal handling are `@iop/runtime`'s, shared with the gateway.
 */
import { announceListening, exporterEnvironmentSchema, runMain, startService, type CloseList } from '@iop/runtime';
import { parseListenAddress, type ListenAddress } from '@iop/validate';
import { parseExporterArgs, USAGE, type ExporterCommand } from './cli-args';
import { EXPORTER_CONFIG_LOAD, ExporterRefusal, startExporter, type RunningExporter } from './exporter';

/** Runs the exporter until SIGTERM or SIGINT; `--help` and a bad command line end in `runMain`. */
async function main(cmd: Exclude<ExporterCommand, { command: 'help' }>, toClose: CloseList): Promise<number> {
  const start = startService('status-exporter', exporterEnvironmentSchema, { ...cmd, load: EXPORTER_CONFIG_LOAD });
  if ('exitCode' in start) return start.exitCode;
  const { config, logger } = start;

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
  process.on('SIGHUP', () => void exporter.reload());
  return announceListening('status-exporter', exporter.url, { logger, toClose });
}

runMain('status-exporter', { parse: parseExporterArgs, usage: USAGE }, main);
