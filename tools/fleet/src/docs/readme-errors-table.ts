import { readFileSync } from 'node:fs';
import path from 'node:path';
import { WORKSPACE_ROOT } from '../local-fleet';

/** One row of the README's "Errors" table. */
export interface ReadmeErrorRow {
  status: number;
  code: string;
  /** The "when" column. */
  when: string;
  /** Marked "(load balancer)": an answer of HAProxy (deploy/haproxy/haproxy.cfg), not of the gateway. */
  loadBalancer: boolean;
}

/**
 * The rows of the README's "Errors" table (every table line under `## Errors` up to the next
 * `## `): a code column of `—` (no body) is skipped; "the upstream's (`rate_limit_exceeded`)"
 * yields the code in backticks.
 * @throws Error when the README has no "## Errors" section.
 */
export function readmeErrorRows(root: string = WORKSPACE_ROOT): ReadmeErrorRow[] {
  const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
  const section = readme.split(/^## Errors$/m)[1];
  if (section === undefined) throw new Error('README has no "## Errors" section');
  const next = section.search(/^## /m);
  const rows: ReadmeErrorRow[] = [];
  for (const line of section.slice(0, next === -1 ? undefined : next).split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    const status = Number(cells[1]);
    if (!line.startsWith('|') || !Number.isInteger(status)) continue;
    const code = /`([a-z_]+)`/.exec(cells[2])?.[1];
    if (code !== undefined)
      rows.push({ status, code, when: cells[3] ?? '', loadBalancer: cells[2].includes('(load balancer)') });
  }
  return rows;
}
