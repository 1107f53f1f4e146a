import type { QueueClient } from '@iop/dispatch';
import { MAX_PRIORITY, MIN_PRIORITY, type FlowClient } from '@iop/validate';
import { invalidRequest } from '../../errors';

/** The header with which a request may lower its band (README "Clients, priority and fair share"). */
export const PRIORITY_HEADER = 'x-iop-priority';

/**
 * The queue's view of a request's client (docs/architecture.md, "Clients, priority and fair share"):
 * its band is the client's `priority`, lowered by `x-iop-priority` when that is lower. A higher value
 * never raises it and is ignored. Its caps and token budgets are the client's. `sole`: the fleet has no other client (`soleClient`, flow control
 * off), so the queue need not keep its counts (`QueueClient.solo`).
 * @throws ApiError 400 `invalid_request_error` (param `x-iop-priority`) when the header is not one
 *   integer from -1000 to 1000.
 */
export function requestClient(client: FlowClient, header: string | string[] | undefined, sole = false): QueueClient {
  const band = header === undefined ? client.priority : Math.min(client.priority, parsePriority(header));
  return {
    id: client.id,
    band,
    weight: client.weight,
    ...(client.maxInFlight !== undefined ? { maxInFlight: client.maxInFlight } : {}),
    ...(client.maxQueued !== undefined ? { maxQueued: client.maxQueued } : {}),
    // Its token budgets go with every request (README "Token budgets: what a client sees"): admission charges them.
    ...(client.tokenBudgets !== undefined ? { tokenBudgets: client.tokenBudgets } : {}),
    ...(sole ? { solo: true } : {}),
  };
}

function parsePriority(header: string | string[]): number {
  const text = Array.isArray(header) ? undefined : header.trim();
  const value = text !== undefined && /^[+-]?\d{1,4}$/.test(text) ? Number(text) : NaN;
  if (Number.isInteger(value) && value >= MIN_PRIORITY && value <= MAX_PRIORITY) return value;
  throw invalidRequest(
    `The ${PRIORITY_HEADER} header must be one whole number from ${MIN_PRIORITY} to ${MAX_PRIORITY}; it can only lower the priority of the request's client.`,
    PRIORITY_HEADER,
  );
}
