/**
 * The deepest a request body may nest arrays and objects, counting the body object itself as
 * level 1 (`{"a": [1]}` is 2 levels deep). README "Errors": deeper bodies are a 400
 * `invalid_request_error` decided before admission. The gateway re-serialises every body it
 * forwards and several of its code paths recurse over JSON values; the limit keeps all of them far
 * from the stack's reach, whatever the body (JSON.parse itself accepts any depth). 100 levels leave
 * room for deeply nested JSON Schemas in `response_format` or `tools`.
 */
export const MAX_BODY_DEPTH = 100;

/** Where a body first goes deeper than the limit: the top-level field holding it (`null` for the body itself). */
export interface TooDeep {
  field: string | null;
}

/**
 * Checks that `value` (a parsed JSON value) nests arrays and objects at most `limit` levels deep.
 * Iterative (an explicit stack, no recursion), so any depth is safe to check, and it stops at the
 * first value past the limit: the cost is one visit per array or object up to `limit` levels,
 * nothing per string or number.
 * @returns `null` when the value is within the limit, else where it first goes deeper.
 */
export function findTooDeep(value: unknown, limit: number = MAX_BODY_DEPTH): TooDeep | null {
  if (value === null || typeof value !== 'object') return null;
  if (limit < 1) return { field: null };
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
      if (child === null || typeof child !== 'object') continue;
      const childField = keys ? keys[i] : field;
      if (depth + 1 > limit) return { field: childField };
      containers.push(child);
      depths.push(depth + 1);
      fields.push(childField);
    }
  }
  return null;
}
