import { z } from 'zod';

/** How a {@link firstErrorArray} checks each element: a zod schema, or a predicate and its message (cheaper for primitives). */
export type ElementCheck<T> = z.ZodType<T> | { is: (value: unknown) => value is T; error: string };

/**
 * A request array checked element by element that stops at the first bad one (README "Security",
 * "Errors"): a bad body costs O(position of its first error), never one issue per element (a
 * `z.array` walks every element and collects an issue for each bad one, so a body of a million bad
 * elements costs seconds). The one issue raised names the element (`messages[3].role`), as
 * `z.array` would.
 * @param opts.error the message when the value is not an array; `min`/`minError` a lower bound of its length.
 * @returns a schema whose output is the array of the elements' outputs.
 */
export function firstErrorArray<T>(
  element: ElementCheck<T>,
  opts: { error: string; min?: number; minError?: string },
): z.ZodType<T[], unknown> {
  return z
    .custom<unknown[]>((value) => Array.isArray(value), { error: opts.error })
    .transform((items, ctx) => {
      if (opts.min !== undefined && items.length < opts.min) {
        ctx.addIssue({ code: 'custom', message: opts.minError ?? opts.error, input: items });
        return z.NEVER;
      }
      const out: T[] = [];
      for (let i = 0; i < items.length; i++) {
        const item: unknown = items[i];
        if (element instanceof z.ZodType) {
          const parsed = element.safeParse(item);
          if (!parsed.success) {
            const issue = parsed.error.issues[0];
            ctx.addIssue({ code: 'custom', message: issue.message, path: [i, ...issue.path], input: item });
            return z.NEVER;
          }
          out.push(parsed.data);
        } else if (element.is(item)) {
          out.push(item);
        } else {
          ctx.addIssue({ code: 'custom', message: element.error, path: [i], input: item });
          return z.NEVER;
        }
      }
      return out;
    });
}
