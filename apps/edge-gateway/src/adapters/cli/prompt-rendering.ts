import { echoed, invalidRequest } from '../../errors';
import type { ChatMessage } from '../adapter';

const TEXT_PART_TYPES = new Set(['text', 'input_text', 'output_text']);

/** The roles a chat message may have: the closed OpenAI set (README "Adapters"). */
export const CHAT_ROLES = ['system', 'developer', 'user', 'assistant', 'tool', 'function'] as const;
export type ChatRole = (typeof CHAT_ROLES)[number];

/** How a CLI adapter writes the messages on stdin (`prompt_format`). */
export type PromptFormat = 'text' | 'jsonl';

/**
 * Every character sequence a program might take for a line break: `\r\n`, `\n`, a lone `\r`,
 * vertical tab, form feed, the file/group/record separators (`\x1c`-`\x1e`), NEL (U+0085) and the
 * Unicode line and paragraph separators (U+2028, U+2029). This is the union of what common line
 * readers split on (Python's `str.splitlines`, Unicode UAX #14 mandatory breaks, `\r`-only
 * terminals), so no reader sees a line start that {@link escapeRoleLines} did not see.
 */
// eslint-disable-next-line no-control-regex -- the file/group/record separators are line breaks to some readers
export const LINE_BREAK = /\r\n|[\n\v\f\r\x1c-\x1e\u0085\u2028\u2029]/;

/**
 * What may stand before a role label on a line and still let it read as one: blanks that are not
 * line breaks, no-break and wide spaces, zero-width characters and the BOM (a lenient reader trims them).
 */
const BLANK = '[\\t \\x1f\\u00a0\\u1680\\u2000-\\u200d\\u202f\\u205f\\u2060\\u3000\\ufeff]';

/**
 * A line of message text that would read as a role line of the `text` format: at the start of the
 * text or after any {@link LINE_BREAK}, optional blanks, optional backslashes, a role label,
 * optional blanks, a colon. {@link escapeRoleLines} puts one more backslash before the label.
 */
const ROLE_LINE = new RegExp(`(^|${LINE_BREAK.source})(${BLANK}*)(\\\\*)(${CHAT_ROLES.join('|')})(${BLANK}*:)`, 'gi');

/**
 * Most characters of a message's text escaped in one turn of the event loop ({@link renderPromptInTurns}):
 * a text of role lines only (`"\nuser:"` over and over) costs a few µs per line, so a 4 MiB one
 * would hold the loop for seconds in one go; in slices of this size no turn takes more than a few
 * tens of ms (docs/architecture.md, "Costly bodies").
 */
export const ESCAPE_SLICE_CHARS = 32_768;

/** A line break character; a slice of text is cut just after one, so the next slice starts a line. */
// eslint-disable-next-line no-control-regex -- the file/group/record separators are line breaks to some readers
const LINE_BREAK_CHAR = /[\n\v\f\r\x1c-\x1e\u0085\u2028\u2029]/g;

/**
 * Escapes the lines of a message's text that could pass for a role line in the `text` format, so
 * text cannot forge a turn whatever line breaks it uses ({@link LINE_BREAK}): each line that begins
 * (after blanks) with backslashes, a role label and a colon (`System:`, `  assistant :`,
 * `\User:`) gets one backslash more before the label (`\System:`, `  \assistant :`, `\\User:`).
 * Strip one backslash from such lines to read the text back; nothing else changes, line breaks
 * included. The first line is escaped too unless `fromSecondLine` (it follows the block's own
 * `Role: ` label there).
 */
export function escapeRoleLines(text: string, fromSecondLine = false): string {
  return [...escapedSlices(text, fromSecondLine)].join('');
}

/**
 * {@link escapeRoleLines}, in slices of about {@link ESCAPE_SLICE_CHARS} characters, each cut just
 * after a line break (a slice starts a line, so `^` in {@link ROLE_LINE} is a line start there;
 * a `\r\n` cut in two escapes the same line the same way).
 */
function* escapedSlices(text: string, fromSecondLine: boolean): Generator<string, void, undefined> {
  let at = 0;
  if (fromSecondLine) {
    // The rest starts with the first line break: only a line after it can be escaped.
    LINE_BREAK_CHAR.lastIndex = 0;
    const first = LINE_BREAK_CHAR.exec(text);
    if (first === null) {
      yield text;
      return;
    }
    yield text.slice(0, first.index);
    at = first.index;
  }
  while (at < text.length) {
    LINE_BREAK_CHAR.lastIndex = Math.min(at + ESCAPE_SLICE_CHARS, text.length);
    const next = LINE_BREAK_CHAR.exec(text);
    const end = next === null ? text.length : next.index + 1;
    yield text.slice(at, end).replace(ROLE_LINE, '$1$2\\$3$4$5');
    at = end;
  }
}

/** JSON.stringify leaves these raw; a line reader that splits on them would cut a `jsonl` line. */
const JSON_RAW_BREAKS = /[\u0085\u2028\u2029]/g;

/**
 * One `jsonl` line: the message as JSON in pure single-line form, ending in `"\n"`, in pieces of at
 * most {@link ESCAPE_SLICE_CHARS} characters (a text of nothing but U+2028 is an escape per character).
 */
function* jsonLinePieces(role: string, content: string): Generator<string, void, undefined> {
  const json = JSON.stringify({ role, content });
  for (let at = 0; at < json.length; at += ESCAPE_SLICE_CHARS)
    yield json
      .slice(at, at + ESCAPE_SLICE_CHARS)
      .replace(JSON_RAW_BREAKS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  yield '\n';
}

/**
 * Renders chat messages into the prompt a CLI model reads on stdin (a command-line
 * program wrapped as a model), in the adapter's `prompt_format`:
 * - `text` (default), chosen so that a plain "prompt in, answer out" program works unchanged for
 *   the common single-turn call:
 *   - exactly one message, from `user` → its text alone (no label, no trailing newline), with every
 *     line that would read as a role line escaped, the first one included ({@link escapeRoleLines}):
 *     `"hi\n\nSystem: x"` is sent as `"hi\n\n\\System: x"`, any other text byte for byte;
 *   - otherwise one block per message, `<Role>: <text>` (`System`, `Developer`, `User`,
 *     `Assistant`, `Tool`, `Function`), blocks separated by one blank line (`"\n\n"`), e.g.
 *     `"System: Be brief.\n\nUser: Hi\n\nAssistant: Hello\n\nUser: And now?"`. A line of a
 *     message's text that would read as a role line, after any kind of line break ({@link LINE_BREAK}),
 *     is escaped, so text cannot forge a turn: a `Role: ` at the start of a line is always a real
 *     message's role.
 * - `jsonl`: one JSON object `{"role": ..., "content": ...}` per message, each on its own line
 *   ending in `"\n"`, whatever the number of messages. Every line break inside a string is a JSON
 *   escape, U+0085, U+2028 and U+2029 included (`\u2028`), so the only line breaks are the ones
 *   between messages, for any line reader.
 * A message's text is its `content` string, or the `text` of its content parts (`text`,
 * `input_text`, `output_text`) joined with `"\n"`; `null` content (an assistant turn that only
 * called tools) is empty text.
 * @throws ApiError 400 `invalid_request_error` (param `messages[i].content[j]`) for a non-text
 *   content part (image, audio, file): a CLI model reads text only; (param `messages[i].role`) for
 *   a role outside {@link CHAT_ROLES}.
 */
export function renderPrompt(messages: readonly ChatMessage[], format: PromptFormat = 'text'): string {
  return [...promptPieces(messages, format)].join('');
}

/**
 * {@link renderPrompt} without holding the event loop: the pieces are made one per turn (a turn
 * escapes at most {@link ESCAPE_SLICE_CHARS} characters of text; docs/architecture.md, "Costly
 * bodies"), and it stops when `signal` fires.
 * @throws ApiError 400 as {@link renderPrompt}, before any turn passes; `signal`'s reason once it fired.
 */
export async function renderPromptInTurns(
  messages: readonly ChatMessage[],
  format: PromptFormat,
  signal: AbortSignal,
): Promise<string> {
  const pieces: string[] = [];
  let sinceTurn = 0;
  for (const piece of promptPieces(messages, format)) {
    pieces.push(piece);
    sinceTurn += piece.length;
    if (sinceTurn < ESCAPE_SLICE_CHARS) continue;
    sinceTurn = 0;
    await new Promise((resolve) => setImmediate(resolve));
    if (signal.aborted) throw signal.reason;
  }
  return pieces.join('');
}

/** The prompt's text in pieces, as {@link renderPrompt} joins them; checks every message first. */
function* promptPieces(messages: readonly ChatMessage[], format: PromptFormat): Generator<string, void, undefined> {
  const texts = messages.map((message, i) => messageText(message, i));
  messages.forEach((message, i) => checkRole(message.role, i));
  if (format === 'jsonl') {
    for (let i = 0; i < messages.length; i++) yield* jsonLinePieces(messages[i].role, texts[i]);
    return;
  }
  if (messages.length === 1 && messages[0].role === 'user') {
    yield* escapedSlices(texts[0], false);
    return;
  }
  for (let i = 0; i < messages.length; i++) {
    yield `${i === 0 ? '' : '\n\n'}${roleLabel(messages[i].role)}: `;
    yield* escapedSlices(texts[i], true);
  }
}

function checkRole(role: unknown, i: number): void {
  if (typeof role === 'string' && (CHAT_ROLES as readonly string[]).includes(role)) return;
  throw invalidRequest(`messages[${i}].role must be one of ${CHAT_ROLES.join(', ')}.`, `messages[${i}].role`);
}

function messageText(message: ChatMessage, i: number): string {
  const content = message.content;
  if (content == null) return '';
  if (typeof content === 'string') return content;
  return content
    .map((part, j) => {
      if (TEXT_PART_TYPES.has(part.type) && typeof part.text === 'string') return part.text;
      throw invalidRequest(
        `messages[${i}].content[${j}] has type "${echoed(String(part.type))}"; this model is a command-line program and reads text only.`,
        `messages[${i}].content[${j}]`,
      );
    })
    .join('\n');
}

function roleLabel(role: string): string {
  return role.charAt(0).toUpperCase() + role.slice(1);
}
