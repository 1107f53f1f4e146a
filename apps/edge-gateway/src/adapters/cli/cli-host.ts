import type { EdgeConfig } from '@iop/validate';
import type { Logger } from 'pino';
import { RUN_MARKER } from './cli-process';
import { CliSandbox } from './cli-sandbox';
import { EscapedProcessSweeper } from './escaped-processes';

/**
 * What every CLI adapter of one gateway shares: how programs are started (the sandbox of
 * `gateway.cli_sandbox`) and the one sweeper for processes that survive their run, so runs that end
 * together share a sweep.
 */
export interface CliHost {
  sandbox: CliSandbox;
  sweeper: EscapedProcessSweeper;
}

let fallback: CliHost | undefined;

/**
 * The host of CLI adapters built without one (`createAdapter`, tests): the default, safe sandbox
 * (`bwrap`, hiding no file of its own) and a sweeper that logs nothing. One per process.
 */
export function defaultCliHost(): CliHost {
  fallback ??= { sandbox: new CliSandbox('bwrap'), sweeper: new EscapedProcessSweeper(RUN_MARKER) };
  return fallback;
}

/**
 * The gateway's CLI host (README "Security"): `gateway.cli_sandbox` as the process started with it
 * (a reload does not change it), hiding `configFile` from programs, logging to `logger`. When the
 * file has an enabled CLI adapter the sandbox is checked at once, so a host where bwrap does not
 * work says so at start (error level; CLI models then answer 502), and `none` is warned about.
 * Every sweep of `/proc` is logged (warn when it killed a survivor).
 */
export function gatewayCliHost(config: EdgeConfig, configFile: string, logger: Logger): CliHost {
  const mode = config.gateway.cli_sandbox;
  const sandbox = new CliSandbox(mode, {
    hidden: [configFile],
    onCheck: ({ reason }) => {
      if (mode === 'none') return;
      if (reason === undefined) logger.info({ cli_sandbox: mode }, 'CLI programs run in the bwrap sandbox');
      else
        logger.error(
          { cli_sandbox: mode, reason },
          `CLI programs will not run: the bwrap sandbox does not work on this host (${reason}); CLI models answer 502 until it does. Install bubblewrap, or set gateway.cli_sandbox: none for programs trusted with the gateway's secrets (README "Security")`,
        );
    },
  });
  const sweeper = new EscapedProcessSweeper(RUN_MARKER, {
    onSweep: (result) =>
      logger[result.killed > 0 ? 'warn' : 'info'](
        { cli_sweep: result },
        `CLI runs left processes outside their process group: swept /proc for ${result.runs} run(s), killed ${result.killed}`,
      ),
  });
  const usesCli = config.nodes.some((node) => node.adapters.some((a) => a.type === 'cli' && a.enabled));
  if (usesCli && mode === 'none') {
    logger.warn(
      { cli_sandbox: mode },
      'gateway.cli_sandbox is none: CLI programs run as the gateway\'s own children and can read its environment, command line and config file (README "Security")',
    );
  }
  if (usesCli) void sandbox.check();
  return { sandbox, sweeper };
}
