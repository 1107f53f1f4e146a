import { invalidRequest } from '../../errors';
import type { ChatMessage } from '../adapter';

const TEXT_PART_TYPES = new Set(['text', 'input_text', 'output_text']);

/**
 * Renders chat messages into the prompt a CLI model reads on stdin (DESIGN §1: a command-line
 * program wrapped as a model). The format, chosen so that a plain "prompt in, answer out" program
 * works unchanged for the common single-turn call:
 * - exactly one message, from `user` → its text alone, byte for byte (no label, no trailing newline);
 * - otherwise one block per message, `<Role>: <text>` (role with its first letter upper-cased:
 *   `System`, `User`, `Assistant`, `Tool`, …), blocks separated by one blank line (`"\n\n"`), e.g.
 *   `"System: Be brief.\n\nUser: Hi\n\nAssistant: Hello\n\nUser: And now?"`.
 * A message's text is its `content` string, or the `text` of its content parts (`text`,
 * `input_text`, `output_text`) joined with `"\n"`; `null` content (an assistant turn that only
 * called tools) is empty text.
 * @throws ApiError 400 `invalid_request_error` (param `messages[i].content[j]`) for a non-text
 *   content part (image, audio, file): a CLI model reads text only.
 */
export function renderPrompt(messages: readonly ChatMessage[]): string {
  const texts = messages.map((message, i) => messageText(message, i));
  if (messages.length === 1 && messages[0].role === 'user') return texts[0];
  return messages.map((message, i) => `${roleLabel(message.role)}: ${texts[i]}`).join('\n\n');
}

function messageText(message: ChatMessage, i: number): string {
  const content = message.content;
  if (content == null) return '';
  if (typeof content === 'string') return content;
  return content
    .map((part, j) => {
      if (TEXT_PART_TYPES.has(part.type) && typeof part.text === 'string') return part.text;
      throw invalidRequest(`messages[${i}].content[${j}] has type "${part.type}"; this model is a command-line program and reads text only.`, `messages[${i}].content[${j}]`);
    })
    .join('\n');
}

function roleLabel(role: string): string {
  return role.charAt(0).toUpperCase() + role.slice(1);
}
