import { echoed } from '../../errors';

/**
 * The deepest a request body may nest arrays and objects, counting the body object itself as
 * level 1 (`{"a": [1]}` is 2 levels deep). README "Errors": deeper bodies are a 400
 * `invalid_request_error` decided before admission. The gateway re-serialises every body it
 * forwards and several of its code paths recurse over JSON values; the limit keeps all of them far
 * from the stack's reach, whatever the body (JSON.parse itself accepts any depth). 100 levels leave
 * room for deeply nested JSON Schemas in `response_format` or `tools`.
 */
export const MAX_BODY_DEPTH = 100;

/**
 * What first makes a body one the gateway cannot forward as it came: nesting past the limit
 * (`depth`), or a number JSON.parse turned into ±Infinity (`number`, e.g. `1e999`, which
 * re-serialising would silently turn into `null`); `field` is the top-level field holding it
 * (`null` for the body itself).
 */
export interface TooDeep {
  kind: 'depth' | 'number';
  field: string | null;
}

/**
 * Checks that `value` (a parsed JSON value) nests arrays and objects at most `limit` levels deep and
 * holds only finite numbers. Iterative (an explicit stack, no recursion), so any depth is safe to
 * check, and it stops at the first problem: the cost is one visit per value up to `limit` levels.
 * @returns `null` when the value is fine, else what is wrong and where.
 */
export function findTooDeep(value: unknown, limit: number = MAX_BODY_DEPTH): TooDeep | null {
  if (typeof value === 'number') return Number.isFinite(value) ? null : { kind: 'number', field: null };
  if (value === null || typeof value !== 'object') return null;
  if (limit < 1) return { kind: 'depth', field: null };
  // Parallel stacks: a container, its depth, and the top-level field it sits under.
  const containers: object[] = [value];
  const depths: number[] = [1];
  const fields: Array<string | null> = [null];
  while (containers.length > 0) {
    // The three stacks have the same length, so none of these pops is empty.
    const container = containers.pop() as object;
    const depth = depths.pop() as number;
    const field = fields.pop() as string | null;
    const children = Array.isArray(container) ? container : Object.values(container);
    const keys = depth === 1 && !Array.isArray(container) ? Object.keys(container) : undefined;
    for (let i = 0; i < children.length; i++) {
      const child: unknown = children[i];
      if (typeof child === 'number') {
        if (!Number.isFinite(child)) return { kind: 'number', field: keys ? keys[i] : field };
        continue;
      }
      if (child === null || typeof child !== 'object') continue;
      const childField = keys ? keys[i] : field;
      if (depth + 1 > limit) return { kind: 'depth', field: childField };
      containers.push(child);
      depths.push(depth + 1);
      fields.push(childField);
    }
  }
  return null;
}

/**
 * The 400 for a body {@link findTooDeep} found wrong (README "Errors"): names the top-level field
 * (`param`) and the limit, or the number out of range.
 */
export function tooDeepMessage(found: TooDeep, limit: number = MAX_BODY_DEPTH): string {
  const where = found.field === null ? '' : ` (in '${echoed(found.field)}')`;
  return found.kind === 'number'
    ? `The request body holds a number too large for a 64-bit float${where}; it would reach the upstream as null.`
    : `The request body nests arrays or objects more than ${limit} levels deep${where}; the gateway accepts at most ${limit}.`;
}
