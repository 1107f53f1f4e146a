import { formatProblems, loadConfigFile } from '@iop/validate';
import { existsSync } from 'node:fs';

/**
 * Checks the edge.yaml a local fleet is about to run (README "Running a fleet", `--config`) before
 * any process starts, with the validation the gateways run: `${VAR}`s come from this process's
 * environment, except those the fleet sets itself (`REDIS_URL` and `fleetVariables`), which get
 * stand-in values here.
 * @throws Error naming the file and every problem, each with its line, column and fix.
 */
export function checkFleetConfig(file: string, fleetVariables: readonly string[]): void {
  if (!existsSync(file)) throw new Error(`${file} does not exist`);
  const standIns = Object.fromEntries(
    ['REDIS_URL', ...fleetVariables].map((name) => [
      name,
      name === 'REDIS_URL' ? 'redis://127.0.0.1:6379' : 'http://127.0.0.1:1/v1',
    ]),
  );
  const loaded = loadConfigFile(file, { ...process.env, ...standIns });
  if (!loaded.ok) throw new Error(`${file} is invalid:\n${formatProblems(file, loaded.problems)}`);
}
