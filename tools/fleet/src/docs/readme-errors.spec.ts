import { ERROR_CATALOG, isCatalogCode } from '@iop/errors';
import { readmeErrorRows } from './readme-errors-table';

/** README "Errors" lists the gateway's codes as ERROR_CATALOG (@iop/validate) defines them; the load balancer's rows are checked against haproxy.cfg (../load-balancer). */
describe('ERROR_CATALOG and the README "Errors" table', () => {
  const rows = readmeErrorRows().filter((r) => !r.loadBalancer);

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
