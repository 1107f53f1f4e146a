/**
 * What a text an upstream wrote must lose before a client reads it (README "Security", "Errors"):
 * every secret the gateway sends that upstream and every name of where the upstream is. An upstream
 * may quote the request it got (its headers, its URL) in any encoding its framework uses, so each
 * secret is matched in every form it could come back in ({@link secretForms}), in any case.
 */

/** A secret shorter than this (a query value `v=1`) is not redacted alone: it would cut words out of any text. */
export const MIN_SECRET_CHARS = 4;

/** `text` as JSON writes it inside a string (no quotes): `"` `\` and control characters escaped. */
const jsonEscaped = (text: string) => JSON.stringify(text).slice(1, -1);

/** `text` with every non-ASCII character as `\uXXXX`, as Python's `json.dumps` writes it by default. */
const asciiEscaped = (text: string) =>
  text.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

/** `fn(text)`, or nothing when `fn` throws (`encodeURIComponent` of a lone surrogate). */
function tryForm(fn: (text: string) => string, text: string): string[] {
  try {
    return [fn(text)];
  } catch {
    return [];
  }
}

/**
 * Every form `secret` may be quoted in: as it is; as written in `base_url` (`asWritten`, e.g.
 * `SECRET%2Fenc`); percent-encoded (`encodeURIComponent`, `encodeURI`, form encoding with `+` for a
 * space); and each of those JSON-escaped (`JSON.stringify(s).slice(1, -1)`), with `/` as `\/`
 * (PHP, some Java encoders), non-ASCII as `\uXXXX`, and escaped twice (a JSON body quoting a JSON
 * text). Matching is case-insensitive ({@link textRedactor}), which covers `%2f` and a lowercased quote.
 */
export function secretForms(secret: string, asWritten?: string): string[] {
  const forms = new Set<string>([secret]);
  if (asWritten !== undefined) forms.add(asWritten);
  for (const encode of [encodeURIComponent, encodeURI, (s: string) => new URLSearchParams({ s }).toString().slice(2)])
    for (const form of tryForm(encode, secret)) forms.add(form);
  for (let round = 0; round < 2; round++) {
    for (const form of [...forms]) {
      const json = jsonEscaped(form);
      forms.add(json);
      forms.add(json.replace(/\//g, '\\/'));
      forms.add(asciiEscaped(json));
    }
  }
  return [...forms];
}

/** What one matched string becomes. */
export type Redactions = ReadonlyMap<string, string>;

/**
 * A function replacing, in one pass, every key of `redactions` found in a text (case-insensitive,
 * the longest first at each position, so a secret that holds another is replaced whole) by its value.
 * Keys are compared lowercased; an empty map returns the text as it is.
 */
export function textRedactor(redactions: Redactions): (text: string) => string {
  const byLower = new Map<string, string>();
  for (const [form, replacement] of redactions) {
    const lower = form.toLowerCase();
    if (form !== '' && !byLower.has(lower)) byLower.set(lower, replacement);
  }
  if (byLower.size === 0) return (text) => text;
  const alternatives = [...byLower.keys()]
    .sort((a, b) => b.length - a.length)
    .map((form) => form.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  const pattern = new RegExp(alternatives.join('|'), 'gi');
  return (text) => text.replace(pattern, (match) => byLower.get(match.toLowerCase()) ?? '***');
}

/**
 * The raw `key=value` pairs of a query string as written (`?a=SECRET%2Fx&b=c`), value not decoded,
 * with the decoded value `URLSearchParams` gives.
 */
export function queryValues(search: string): Array<{ decoded: string; asWritten: string }> {
  const raw = search.replace(/^\?/, '');
  if (raw === '') return [];
  return raw.split('&').map((pair) => {
    const asWritten = pair.includes('=') ? pair.slice(pair.indexOf('=') + 1) : '';
    return { asWritten, decoded: new URLSearchParams(`v=${asWritten}`).get('v') ?? asWritten };
  });
}
