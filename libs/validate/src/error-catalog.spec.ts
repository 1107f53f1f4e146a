import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ERROR_CATALOG, catalogAnswer, isCatalogCode } from './error-catalog';

/**
 * The README's "Errors" table as rows of (status, code): the first table under `## Errors`; a code
 * column of `—` (no body) is skipped; "the upstream's (`rate_limit_exceeded`)" yields the code in
 * backticks. Rows marked "(load balancer)" are HAProxy's own answers, not the gateway's
 * (tools/fleet/src/load-balancer/haproxy-config.spec.ts checks them against deploy/haproxy/haproxy.cfg).
 */
function readmeErrorRows(): { status: number; code: string; when: string }[] {
  const readme = readFileSync(join(__dirname, '../../../README.md'), 'utf8');
  const section = readme.split(/^## Errors$/m)[1];
  if (section === undefined) throw new Error('README has no "## Errors" section');
  const table = section.slice(0, section.search(/^## /m) === -1 ? undefined : section.search(/^## /m));
  const rows: { status: number; code: string; when: string }[] = [];
  for (const line of table.split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    const status = Number(cells[1]);
    if (!line.startsWith('|') || !Number.isInteger(status) || cells[2].includes('(load balancer)')) continue;
    const code = /`([a-z_]+)`/.exec(cells[2])?.[1];
    if (code !== undefined) rows.push({ status, code, when: cells[3] ?? '' });
  }
  return rows;
}

describe('ERROR_CATALOG and the README "Errors" table', () => {
  const rows = readmeErrorRows();

  it('parses the table', () => {
    expect(rows.length).toBeGreaterThan(10);
  });

  it('documents every catalog code with its status', () => {
    for (const [code, entry] of Object.entries(ERROR_CATALOG)) {
      expect({ code, statuses: rows.filter((r) => r.code === code).map((r) => r.status) }).toEqual({
        code,
        statuses: [entry.status],
      });
    }
  });

  it('has every documented code, with the documented status', () => {
    for (const row of rows) {
      expect({ code: row.code, known: isCatalogCode(row.code) }).toEqual({ code: row.code, known: true });
      if (isCatalogCode(row.code))
        expect({ code: row.code, status: ERROR_CATALOG[row.code].status }).toEqual({
          code: row.code,
          status: row.status,
        });
    }
  });

  it('names Retry-After exactly for the codes that carry one', () => {
    for (const row of rows.filter((r) => isCatalogCode(r.code))) {
      const carries = 'retryAfterS' in ERROR_CATALOG[row.code as keyof typeof ERROR_CATALOG];
      expect({ code: row.code, retryAfter: row.when.includes('Retry-After') }).toEqual({
        code: row.code,
        retryAfter: carries,
      });
    }
  });
});

describe('catalogAnswer', () => {
  it('builds the OpenAI-shaped body with the catalog status and type', () => {
    expect(catalogAnswer('invalid_api_key', 'no key')).toEqual({
      status: 401,
      headers: {},
      body: { error: { message: 'no key', type: 'invalid_request_error', param: null, code: 'invalid_api_key' } },
    });
  });

  it('sends Retry-After for codes that carry one, the caller value first', () => {
    expect(catalogAnswer('queue_full', 'full').headers).toEqual({ 'retry-after': '1' });
    expect(catalogAnswer('queue_timeout', 'late', { retryAfterS: 7 }).headers).toEqual({ 'retry-after': '7' });
    expect(catalogAnswer('queue_full', 'full').body.error.type).toBe('rate_limit_error');
  });
});
