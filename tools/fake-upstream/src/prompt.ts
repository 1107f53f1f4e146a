import { isObject } from './knobs';

/** What the fake reads from a request's conversation. */
export interface Prompt {
  /** Text of the last user message (text parts joined), '' when there is none. */
  lastUserText: string;
  /** Characters of all message text, for the rough `prompt_tokens`. */
  inputChars: number;
}

/** Reads `messages[]` of a chat completion request (content: string or array of text parts). */
export function readChatPrompt(body: Record<string, unknown>): Prompt {
  return readItems(body.messages, 0);
}

/** Reads `input` (string or array of message items) and `instructions` of a Responses API request. */
export function readResponsesPrompt(body: Record<string, unknown>): Prompt {
  const instructionChars = typeof body.instructions === 'string' ? body.instructions.length : 0;
  if (typeof body.input === 'string')
    return { lastUserText: body.input, inputChars: instructionChars + body.input.length };
  return readItems(body.input, instructionChars);
}

function readItems(items: unknown, inputChars: number): Prompt {
  let lastUserText = '';
  if (Array.isArray(items)) {
    for (const item of items) {
      if (!isObject(item)) continue;
      const text = contentText(item.content);
      inputChars += text.length;
      if (item.role === 'user') lastUserText = text;
    }
  }
  return { lastUserText, inputChars };
}

/** The text of a message's `content`: a string, or the `text` of its parts joined ('' for anything else). */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let text = '';
  for (const part of content) if (isObject(part) && typeof part.text === 'string') text += part.text;
  return text;
}

/**
 * The deterministic reply: `echo: <last user text> [model=<requested model> upstream=<name>]`,
 * so a test can tell which model name reached which upstream.
 */
export function echoReply(lastUserText: string, model: string, name: string): string {
  return `echo: ${lastUserText} [model=${model} upstream=${name}]`;
}

/** Rough token count: one token per 4 characters, rounded up. */
export function roughTokens(chars: number): number {
  return Math.ceil(chars / 4);
}

/** Splits `text` into exactly `n` consecutive pieces of near-equal length (some may be ''), never inside a surrogate pair. */
export function splitText(text: string, n: number): string[] {
  const pieces: string[] = [];
  let start = 0;
  for (let i = 1; i <= n; i++) {
    let end = Math.floor((i * text.length) / n);
    if (end < text.length && isLowSurrogate(text.charCodeAt(end))) end++;
    if (end < start) end = start;
    pieces.push(text.slice(start, end));
    start = end;
  }
  return pieces;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}
