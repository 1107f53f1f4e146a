const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const COLON = 0x3a;

/*
 * The weights below are what V8 spends to build each kind of value with `JSON.parse` and write it
 * again with `JSON.stringify`, in elements of an array of small numbers (`[0,0,…]`, ~40-100 ns
 * each), measured at the default bound on the shapes a body can repeat (docs/architecture.md,
 * "Costly bodies"): an array, empty or not, costs 3-15 elements (`[[],…]`, `[[0],…]`, arrays nested
 * 98 deep); an object 8-16 (`[{},…]`); an object member 5-30, the most when every key is new (each
 * new key builds a hidden class; an object past ~1,000 keys becomes a hash table). Each weight is
 * about the highest cost seen, so the costliest shape at the bound costs about what the same count
 * of `[0,0,…]` elements costs, never 10-100× more.
 */

/** What one array weighs in the count, in values, whether empty or not; its first element included. */
export const ARRAY_WEIGHT = 8;
/** What one object weighs in the count, in values, whether empty or not; its first member's separator included. */
export const OBJECT_WEIGHT = 8;
/** What one object member weighs in the count, in values (its key and its slot in the object). */
export const MEMBER_WEIGHT = 20;

/**
 * Counts the JSON values of a body as its decoded bytes arrive, weighted by what building them
 * costs, before anything parses it (README "Security", `gateway.max_body_values`): what
 * `JSON.parse`, the request schemas and every later step spend on a body grows with its values, not
 * its bytes (a 3 KB gzip body can inflate to a million `0,` or `{},`), so the count is bounded
 * before that work is done.
 *
 * The count is 1 (the body) + 1 for every `,` outside strings + {@link ARRAY_WEIGHT} for every `[`
 * + {@link OBJECT_WEIGHT} for every `{` + `MEMBER_WEIGHT - 1` for every `:` (a member's `,` or its
 * object's `{` adds the rest). For any valid JSON text it lies between `elements + MEMBER_WEIGHT ×
 * members + (ARRAY_WEIGHT - 1) × arrays + (OBJECT_WEIGHT - 1) × objects` and that + the containers
 * + 1, where `elements` are the array elements. One pass over the bytes: strings are skipped with
 * `Buffer.indexOf`, so a body of long texts costs little more than its copy. Invalid JSON is counted
 * all the same; `JSON.parse` refuses it afterwards.
 */
export class JsonValueCounter {
  /** Values counted so far (weighted). */
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
      else if (byte === COMMA) {
        if (++this.count > limit) return false;
      } else if (byte === OPEN_ARRAY) {
        this.count += ARRAY_WEIGHT;
        if (this.count > limit) return false;
      } else if (byte === OPEN_OBJECT) {
        this.count += OBJECT_WEIGHT;
        if (this.count > limit) return false;
      } else if (byte === COLON) {
        this.count += MEMBER_WEIGHT - 1;
        if (this.count > limit) return false;
      }
    }
    return true;
  }
}
