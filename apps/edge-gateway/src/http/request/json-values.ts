const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const COLON = 0x3a;

/**
 * What one object member weighs in the count, in values. V8 builds, walks and serialises an object
 * of many keys at 40-100× the cost of as many array elements (past ~1,000 keys an object becomes a
 * hash table): measured on the gateway's path, 300k keys cost ~500 ms where 600k zeros cost ~25 ms.
 * No OpenAI request has more than a few thousand members (tool and response schemas), many have
 * large arrays (embeddings token ids).
 */
export const MEMBER_WEIGHT = 10;

/**
 * Counts the JSON values of a body as its decoded bytes arrive, before anything parses it (README
 * "Security", `gateway.max_body_values`): what `JSON.parse`, the request schemas and every later step
 * spend on a body grows with its number of values, not its bytes (a 3 KB gzip body can inflate to
 * a million `0,`), so the count is bounded before that work is done.
 *
 * The count is 1 (the body) + every `[` and `{` + every `,` outside strings (each container's first
 * element or member and each one after a comma), and an object member weighs {@link MEMBER_WEIGHT}
 * (its `:` adds the rest). It is an upper bound of the array elements plus `MEMBER_WEIGHT` × the
 * object members of any valid JSON text (an empty `[]` or `{}` counts one too many) and costs one
 * pass over the bytes: strings are skipped with `Buffer.indexOf`, so a body of long texts costs
 * little more than its copy. Invalid JSON is counted all the same; `JSON.parse` refuses it afterwards.
 */
export class JsonValueCounter {
  /** Values counted so far. */
  count = 1;
  private inString = false;
  /** The previous chunk ended inside a string on a backslash: the next byte is escaped. */
  private escaped = false;

  /**
   * Counts one chunk of the body.
   * @returns false as soon as the count passes `limit` (the rest of the chunk is not looked at).
   */
  feed(chunk: Buffer, limit: number): boolean {
    const n = chunk.length;
    let i = 0;
    if (this.escaped) {
      this.escaped = false;
      i = 1;
    }
    // The next quote and backslash at or after `i`, found once and reused until `i` passes them
    // (-1: none in the rest of the chunk), so each byte is searched over once whatever the strings.
    let quote = -2;
    let backslash = -2;
    while (i < n) {
      if (this.inString) {
        if (quote !== -1 && quote < i) quote = chunk.indexOf(QUOTE, i);
        if (backslash !== -1 && backslash < i) backslash = chunk.indexOf(BACKSLASH, i);
        if (backslash >= 0 && (quote < 0 || backslash < quote)) {
          // An escape: skip the escaped byte, which may be in the next chunk.
          i = backslash + 2;
          if (i > n) this.escaped = true;
          continue;
        }
        if (quote < 0) return true;
        this.inString = false;
        i = quote + 1;
        continue;
      }
      const byte = chunk[i++];
      if (byte === QUOTE) this.inString = true;
      else if (byte === COMMA || byte === OPEN_ARRAY || byte === OPEN_OBJECT) {
        if (++this.count > limit) return false;
      } else if (byte === COLON) {
        this.count += MEMBER_WEIGHT - 1;
        if (this.count > limit) return false;
      }
    }
    return true;
  }
}
