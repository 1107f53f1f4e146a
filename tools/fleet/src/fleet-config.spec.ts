import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { checkFleetConfig, describeServed } from './fleet-config';
import { FLEET_CONFIG, FLEET_UPSTREAMS, WORKSPACE_ROOT } from './local-fleet';

const VARIABLES = FLEET_UPSTREAMS.map((u) => u.env);
const shipped = readFileSync(path.join(WORKSPACE_ROOT, FLEET_CONFIG), 'utf8');

/** Writes `text` as an operator's own file. */
function ownFile(text: string): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'iop-fleet-config-')), 'my.yaml');
  writeFileSync(file, text);
  return file;
}

/** What `npm run fleet` prints for each fake GPU server, for the file at `file`. */
const lines = (file: string) => {
  const served = checkFleetConfig(file, VARIABLES);
  return VARIABLES.map((v) => describeServed(served.get(v) ?? [], v));
};

/** README "Running a fleet": the start-up lines say what the file runs on each fake GPU server. */
describe('what the fleet says each fake GPU server serves', () => {
  it('the shipped file: llama-a (2) and llama-b (3)', () => {
    expect(lines(path.join(WORKSPACE_ROOT, FLEET_CONFIG))).toEqual([
      'provider llama-a, max_concurrency 2',
      'provider llama-b, max_concurrency 3',
    ]);
  });

  it("an operator's file: its own max_concurrency, never the shipped file's", () => {
    const text = shipped.replace('max_concurrency: 2', 'max_concurrency: 1');
    expect(text).not.toBe(shipped);
    expect(lines(ownFile(text))).toEqual([
      'provider llama-a, max_concurrency 1',
      'provider llama-b, max_concurrency 3',
    ]);
  });

  it('a server the file does not use, and one two providers share', () => {
    const text = shipped.replace('${FLEET_UPSTREAM_A}', '${FLEET_UPSTREAM_B}');
    expect(lines(ownFile(text))).toEqual([
      'no provider of the file uses it (${FLEET_UPSTREAM_A})',
      'providers llama-a (max_concurrency 2), llama-b (max_concurrency 3)',
    ]);
  });
});
