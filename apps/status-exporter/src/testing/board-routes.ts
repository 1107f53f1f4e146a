import { appRoutes } from '@bull-board/api/dist/routes';

/** One call of the board's HTTP surface: method and path under the board's base path. */
export interface BoardCall {
  readonly method: string;
  readonly path: string;
}

/**
 * Every route the installed Bull Board serves, as calls on one queue and one job: its pages
 * (`entryPoint`) and its whole API (`appRoutes.api`), read from `@bull-board/api` itself, so a route a
 * new version adds is covered without a change here. `:queueStatus` becomes `failed`, a job
 * scheduler id `none`. `read` holds the GET routes, `write` every other method.
 */
export function boardCalls(queueName: string, jobId: string): { read: BoardCall[]; write: BoardCall[] } {
  const fill = (route: string) =>
    route
      .replace(':queueName', encodeURIComponent(queueName))
      .replace(':jobId', encodeURIComponent(jobId))
      .replace(':queueStatus', 'failed')
      .replace(':schedulerId', 'none');
  const calls: BoardCall[] = [];
  for (const r of [appRoutes.entryPoint, ...appRoutes.api]) {
    for (const method of [r.method].flat()) {
      for (const route of [r.route].flat()) calls.push({ method: method.toUpperCase(), path: fill(route) });
    }
  }
  return { read: calls.filter((c) => c.method === 'GET'), write: calls.filter((c) => c.method !== 'GET') };
}
