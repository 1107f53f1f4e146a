import { Readable } from 'node:stream';
import type { WholeEventsOptions } from '../adapters/openai-compat/whole-events';

/** One whole chat-completion chunk event, as an upstream sends it. */
export const CHAT_EVENT = 'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n';
/** A chat stream's end marker event. */
export const DONE_EVENT = 'data: [DONE]\n\n';

/** Options of `wholeEvents` for a chat stream: `signal` the call's, events of at most 1,024 bytes. */
export const chatReaderOptions = (signal = new AbortController().signal): WholeEventsOptions => ({
  endpoint: 'chat',
  signal,
  where: 'POST http://upstream/v1/chat/completions',
  maxEventBytes: 1024,
});

/** An upstream body a test pushes to by hand (`push(text)`, `push(null)`, `destroy(err)`). */
export const handPushedBody = (): Readable => new Readable({ read: () => undefined });
