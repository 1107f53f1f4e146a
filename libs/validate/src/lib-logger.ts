/**
 * The one logger shape every lib takes (`ConfigRuntime`, `RedisProviderQueue`): pino's
 * `(obj, msg)` call, so a pino logger (or a child of one) fits as it is. `obj` carries the
 * structured fields of the line; an error goes in as `{ err }` (the Error object itself, which
 * pino's standard `err` serializer writes with its type, message and stack), never pasted into
 * `msg`. `msg` is the human-readable line.
 */
export interface LibLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** A {@link LibLogger} that drops every line (tests, tools that report on their own). */
export const silentLibLogger: LibLogger = {
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

/**
 * A {@link LibLogger} on the console for callers that pass none: warnings and errors as
 * `msg` followed by the error's message (`obj.err`) when there is one; info dropped.
 */
export const consoleLibLogger: LibLogger = {
  info: () => undefined,
  warn: (obj, msg) => console.warn(withErr(obj, msg)),
  error: (obj, msg) => console.error(withErr(obj, msg)),
};

function withErr(obj: object, msg: string): string {
  const err = (obj as { err?: unknown }).err;
  if (err === undefined) return msg;
  return `${msg}: ${err instanceof Error ? err.message : String(err)}`;
}
