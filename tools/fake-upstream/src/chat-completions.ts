import type { OpenAIErrorBody } from './errors';
import { dataEvent, type StreamFormat } from './sse';

/** Token counts in the Chat Completions shape. */
export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** Fields shared by a completion and its chunks. */
export interface ChatIdentity {
  id: string;
  /** Unix seconds. */
  created: number;
  model: string;
  system_fingerprint: string;
}

/** A non-stream `chat.completion` object, serialized. */
export function chatCompletionJson(who: ChatIdentity, content: string, usage: ChatUsage): string {
  return JSON.stringify({
    id: who.id,
    object: 'chat.completion',
    created: who.created,
    model: who.model,
    system_fingerprint: who.system_fingerprint,
    choices: [
      { index: 0, message: { role: 'assistant', content, refusal: null }, logprobs: null, finish_reason: 'stop' },
    ],
    usage,
  });
}

/**
 * `chat.completion.chunk` events: one per content piece (the first also carries the role), a
 * final chunk with `finish_reason: "stop"`, a usage chunk (`choices: []`) when the request asked
 * for `stream_options.include_usage`, then `data: [DONE]`. The fixed parts are built once.
 */
export class ChatChunkFormat implements StreamFormat {
  private readonly head: string;

  constructor(
    who: ChatIdentity,
    private readonly usage: ChatUsage | undefined,
  ) {
    this.head =
      `{"id":${JSON.stringify(who.id)},"object":"chat.completion.chunk","created":${who.created},` +
      `"model":${JSON.stringify(who.model)},"system_fingerprint":${JSON.stringify(who.system_fingerprint)},`;
  }

  open(): string {
    return '';
  }

  delta(piece: string, index: number): string {
    const role = index === 0 ? '"role":"assistant",' : '';
    return dataEvent(
      `${this.head}"choices":[{"index":0,"delta":{${role}"content":${JSON.stringify(piece)}},"logprobs":null,"finish_reason":null}]}`,
    );
  }

  close(): string {
    const stop = dataEvent(`${this.head}"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`);
    const usage = this.usage ? dataEvent(`${this.head}"choices":[],"usage":${JSON.stringify(this.usage)}}`) : '';
    return `${stop}${usage}data: [DONE]\n\n`;
  }

  error(body: OpenAIErrorBody): string {
    return dataEvent(JSON.stringify(body));
  }
}
