/**
 * The one bound on what an error answer echoes of a client's request (README "Errors"): a client
 * string an error quotes (a model id, a path, a field name, an enum value, a `Content-Type`) is cut
 * by {@link echoed}; every error's `param` and message are bounded again where an error is made
 * (`resolveError`, `catalogAnswer`, the gateway's `ApiError`), so no builder can forget it.
 */

/** Longest client-sent string an error message (or `param`) echoes, in characters. */
export const MAX_ECHOED_CHARS = 200;

/**
 * Longest error message, in characters: a backstop over {@link echoed} for a message that quotes a
 * client string unbounded, or an upstream's own 4xx message passed on (read up to 4 KB).
 */
export const MAX_MESSAGE_CHARS = 1000;

/**
 * `text` as an error message or a log quotes it: at most `max` characters (default
 * {@link MAX_ECHOED_CHARS}), then `…(N more characters)`, so a 100 KB model id costs an answer no
 * more than that; a text it already cut is kept as it is, so bounding twice changes nothing. Cut between
 * UTF-16 units: a character split in two is written as U+FFFD by JSON.
 */
export function echoed(text: string, max = MAX_ECHOED_CHARS): string {
  if (text.length <= max || isEchoed(text, max)) return text;
  return `${text.slice(0, max)}${CUT_MARK}${text.length - max}${CUT_END}`;
}

const CUT_MARK = '…(';
const CUT_END = ' more characters)';

/** True when `text` is already the output of {@link echoed} for at most `max` characters: it is not cut twice. */
function isEchoed(text: string, max: number): boolean {
  if (!text.endsWith(CUT_END)) return false;
  const at = text.lastIndexOf(CUT_MARK);
  return at >= 0 && at <= max && /^\d+$/.test(text.slice(at + CUT_MARK.length, -CUT_END.length));
}

/** `param` bounded as {@link echoed}; `null` and `undefined` as `null`. */
export const echoedParam = (param: string | null | undefined): string | null =>
  param === null || param === undefined ? null : echoed(param);

/** A message bounded to {@link MAX_MESSAGE_CHARS}. */
export const boundedMessage = (message: string): string => echoed(message, MAX_MESSAGE_CHARS);

/**
 * The fields of a catalog template with every string echoed ({@link echoed}), except `problem`: the
 * whole message of `invalid_request_error`, written by the gateway (its client parts echoed where it
 * is written) and bounded as a message.
 */
export function echoedFields<F>(fields: F): F {
  if (fields === null || typeof fields !== 'object') return fields;
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(fields as Record<string, unknown>)) {
    out[name] = typeof value === 'string' && name !== 'problem' ? echoed(value) : value;
  }
  return out as F;
}
