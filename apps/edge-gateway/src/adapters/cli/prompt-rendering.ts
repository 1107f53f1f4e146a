import { invalidRequest } from '../../errors';
import type { ChatMessage } from '../adapter';

const TEXT_PART_TYPES = new Set(['text', 'input_text', 'output_text']);

/** The roles a chat message may have: the closed OpenAI set (README "Adapters"). */
export const CHAT_ROLES = ['system', 'developer', 'user', 'assistant', 'tool', 'function'] as const;
export type ChatRole = (typeof CHAT_ROLES)[number];

/** How a CLI adapter writes the messages on stdin (`prompt_format`). */
export type PromptFormat = 'text' | 'jsonl';

/**
 * A line of message text that would read as a role line of the `text` format: optional blanks,
 * optional backslashes, a role label, optional blanks, a colon. {@link escapeRoleLines} puts one
 * more backslash before the label.
 */
const ROLE_LINE = new RegExp(`^([ \\t]*)(\\\\*)(${CHAT_ROLES.join('|')})([ \\t]*:)`, 'gim');

/**
 * Escapes the lines of a message's text that could pass for a role line in the `text` format, so
 * user text cannot forge a turn: each line that begins (after blanks) with backslashes and a role
 * label and a colon (`System:`, `  assistant :`, `\User:`) gets one backslash more before the label
 * (`\System:`, `  \assistant :`, `\\User:`). Strip one backslash from such lines to read the
 * text back. The first line is not touched: it follows the block's own `Role: ` label.
 */
export function escapeRoleLines(text: string): string {
  const newline = text.indexOf('\n');
  if (newline < 0) return text;
  return (
    text.slice(0, newline + 1) +
    text
      .slice(newline + 1)
      .replace(
        ROLE_LINE,
        (_m, blanks: string, slashes: string, label: string, colon: string) => `${blanks}\\${slashes}${label}${colon}`,
      )
  );
}

/**
 * Renders chat messages into the prompt a CLI model reads on stdin (a command-line
 * program wrapped as a model), in the adapter's `prompt_format`:
 * - `text` (default), chosen so that a plain "prompt in, answer out" program works unchanged for
 *   the common single-turn call:
 *   - exactly one message, from `user` → its text alone, byte for byte (no label, no trailing newline);
 *   - otherwise one block per message, `<Role>: <text>` (`System`, `Developer`, `User`,
 *     `Assistant`, `Tool`, `Function`), blocks separated by one blank line (`"\n\n"`), e.g.
 *     `"System: Be brief.\n\nUser: Hi\n\nAssistant: Hello\n\nUser: And now?"`. A line of a
 *     message's text that would read as a role line is escaped ({@link escapeRoleLines}), so text
 *     cannot forge a turn: a `Role: ` at the start of a block is always a real message's role.
 * - `jsonl`: one JSON object `{"role": ..., "content": ...}` per message, each on its own line
 *   ending in `"\n"`, whatever the number of messages: nothing inside a string can forge a line.
 * A message's text is its `content` string, or the `text` of its content parts (`text`,
 * `input_text`, `output_text`) joined with `"\n"`; `null` content (an assistant turn that only
 * called tools) is empty text.
 * @throws ApiError 400 `invalid_request_error` (param `messages[i].content[j]`) for a non-text
 *   content part (image, audio, file): a CLI model reads text only; (param `messages[i].role`) for
 *   a role outside {@link CHAT_ROLES}.
 */
export function renderPrompt(messages: readonly ChatMessage[], format: PromptFormat = 'text'): string {
  const texts = messages.map((message, i) => messageText(message, i));
  messages.forEach((message, i) => checkRole(message.role, i));
  if (format === 'jsonl')
    return messages.map((message, i) => `${JSON.stringify({ role: message.role, content: texts[i] })}\n`).join('');
  if (messages.length === 1 && messages[0].role === 'user') return texts[0];
  return messages.map((message, i) => `${roleLabel(message.role)}: ${escapeRoleLines(texts[i])}`).join('\n\n');
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
        `messages[${i}].content[${j}] has type "${part.type}"; this model is a command-line program and reads text only.`,
        `messages[${i}].content[${j}]`,
      );
    })
    .join('\n');
}

function roleLabel(role: string): string {
  return role.charAt(0).toUpperCase() + role.slice(1);
}
