import { wholeChoices, type TokenWeight } from '../queue/token-limit';

/** The OpenAI endpoint of a request whose weight is estimated: Chat Completions, Responses or Embeddings. */
export type WeighedEndpoint = 'chat' | 'responses' | 'embeddings';

/**
 * A request's token weight, estimated before admission (README "Token-aware provider limits";
 * docs/architecture.md, "Token limits"). Pure, no tokenizer: it runs on every request to a provider
 * with `max_tokens_in_flight`, before the queue, so it must cost microseconds, not a vocabulary load.
 *
 * **Prompt tokens** = ⌈B / 3⌉ + 4 per message or input item, where B is the UTF-8 bytes of every
 * string the model reads: chat `messages` (contents, text parts, names, tool calls and their
 * arguments), Responses `input` and `instructions`, `tools` (their JSON), embeddings `input`. A
 * number in an `input` array (pre-tokenized input) counts as one token. The 4 per message stand for
 * the chat template's role and separators.
 *
 * **Why bytes / 3**: BPE tokenizers of current models (cl100k/o200k, Llama 3, Qwen, Mistral) average
 * about 4 bytes per token on English prose and 3.3 to 4 on source code, so B / 3 is an over-estimate
 * there (the bench's `token-estimate` scenario measures +54 to +57% on English prose, +13 to +36% on
 * source code, README "Token-aware provider limits"): the limit errs on the safe side. CJK text takes 3 UTF-8 bytes a
 * character and about one token a character or less, so it is about right. It can under-estimate
 * text that tokenizes unusually finely: long runs of digits, base64, random identifiers. Images,
 * audio and files (`image_url`, `input_image`, `input_audio`, `file` parts) are not counted: their
 * cost depends on the model's encoder, not on their bytes.
 *
 * **Completion allowance**: chat the larger of `max_completion_tokens` and `max_tokens` (servers
 * differ in which they read), times `n` (choices);
 * Responses `max_output_tokens`; embeddings 0; else absent, and the granting provider's
 * `default_completion_tokens` applies (the queue fills it in), times `n` for chat: a chat request
 * that names no limit carries `choices` (`n` when above 1), so each of its choices is allowed the
 * default (`defaultAllowance`). A string of digits counts as its number (lenient servers read it so);
 * a limit that is not a whole number ≥ 0 counts as absent; an `n` that
 * is not a whole number ≥ 1 counts as one choice; `n` is capped at `Number.MAX_SAFE_INTEGER` and
 * the product too (`wholeChoices`; README "Token-aware provider limits"). Responses has no `n`.
 */
export function estimateTokenWeight(endpoint: WeighedEndpoint, body: object): TokenWeight {
  const fields = body as Record<string, unknown>;
  const count = new TextCounter();
  if (endpoint === 'embeddings') {
    count.walk(fields.input);
    return { prompt: count.tokens(), completion: 0 };
  }
  if (endpoint === 'chat') count.items(fields.messages);
  else {
    count.items(fields.input);
    count.walk(fields.instructions);
  }
  if (fields.tools !== undefined) count.json(fields.tools);
  const prompt = count.tokens();
  if (endpoint === 'responses') {
    const completion = wholeOrUndefined(fields.max_output_tokens);
    return { prompt, ...(completion === undefined ? {} : { completion }) };
  }
  const choices = wholeChoices(fields.n);
  // Both named: the larger counts (servers differ in which one they read: `max_completion_tokens: 0`
  // with `max_tokens: 100000` must not weigh 0).
  const limit = largerOf(wholeOrUndefined(fields.max_completion_tokens), wholeOrUndefined(fields.max_tokens));
  if (limit !== undefined) return { prompt, completion: Math.min(limit * choices, Number.MAX_SAFE_INTEGER) };
  return { prompt, ...(choices > 1 ? { choices } : {}) };
}

/** Bytes per token of the estimate: an over-estimate for English and code (see {@link estimateTokenWeight}). */
export const BYTES_PER_TOKEN = 3;
/** Tokens a chat template adds per message or input item (role, separators). */
export const TOKENS_PER_MESSAGE = 4;

/** Parts whose bytes are not text the model reads as tokens. */
const NOT_TEXT = new Set(['image_url', 'input_image', 'input_audio', 'file', 'file_data', 'image']);

/** Sums the UTF-8 bytes of the strings of a JSON value, and the tokens given as numbers. */
class TextCounter {
  private bytes = 0;
  private direct = 0;

  /** One message or input item each (a string input is one item), plus its text. */
  items(value: unknown): void {
    if (Array.isArray(value)) {
      this.direct += TOKENS_PER_MESSAGE * value.length;
      for (const item of value) this.walk(item);
    } else if (value !== undefined && value !== null) {
      this.direct += TOKENS_PER_MESSAGE;
      this.walk(value);
    }
  }

  /** Every string leaf (skipping image, audio and file parts); a number in an array is one token. */
  walk(value: unknown, inArray = false): void {
    if (typeof value === 'string') this.bytes += Buffer.byteLength(value, 'utf8');
    else if (typeof value === 'number') this.direct += inArray ? 1 : 0;
    else if (Array.isArray(value)) for (const v of value) this.walk(v, true);
    else if (value !== null && typeof value === 'object') {
      const part = value as Record<string, unknown>;
      if (typeof part.type === 'string' && NOT_TEXT.has(part.type)) return;
      for (const [key, v] of Object.entries(part)) if (!NOT_TEXT.has(key)) this.walk(v);
    }
  }

  /** The whole value as JSON (tool definitions: names, descriptions and schemas are all read). */
  json(value: unknown): void {
    this.bytes += Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');
  }

  tokens(): number {
    return Math.ceil(this.bytes / BYTES_PER_TOKEN) + this.direct;
  }
}

/**
 * A whole number ≥ 0 as an allowance: a number, or a string of digits as lenient servers read one
 * (`"100000"` is 100,000 tokens upstream, so it weighs as much here); anything else is absent.
 */
function wholeOrUndefined(value: unknown): number | undefined {
  const n = typeof value === 'string' && /^\s*\d{1,16}\s*$/.test(value) ? Number(value) : value;
  return typeof n === 'number' && Number.isInteger(n) && n >= 0 ? Math.min(n, Number.MAX_SAFE_INTEGER) : undefined;
}

/** The larger of two allowances, either of which may be absent. */
function largerOf(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.max(a, b);
}
