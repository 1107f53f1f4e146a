import type { OpenAIErrorBody } from './errors';
import type { ChatReasoning } from './reasoning';
import { dataEvent, type StreamFormat } from './sse';

/** Token counts in the Chat Completions shape. */
export interface ChatUsage {
  prompt_tokens: number;
  /** Reasoning tokens included. */
  completion_tokens: number;
  total_tokens: number;
  /** Present when the engine is modelled: the prompt tokens found in its prefix cache (tools/fake-upstream/README, "Engine model"). */
  prompt_tokens_details?: { cached_tokens: number };
  /** Present when the answer carries reasoning. */
  completion_tokens_details?: { reasoning_tokens: number };
}

/** Fields shared by a completion and its chunks. */
export interface ChatIdentity {
  id: string;
  /** Unix seconds. */
  created: number;
  model: string;
  system_fingerprint: string;
}

/** A non-stream `chat.completion` object, serialized; the message carries `reasoning` in its fields when given. */
export function chatCompletionJson(
  who: ChatIdentity,
  content: string,
  usage: ChatUsage,
  reasoning?: ChatReasoning,
): string {
  const message: Record<string, unknown> = { role: 'assistant', content, refusal: null };
  for (const field of reasoning?.fields ?? []) message[field] = reasoning?.text;
  return JSON.stringify({
    id: who.id,
    object: 'chat.completion',
    created: who.created,
    model: who.model,
    system_fingerprint: who.system_fingerprint,
    choices: [{ index: 0, message, logprobs: null, finish_reason: 'stop' }],
    usage,
  });
}

/**
 * `chat.completion.chunk` events: one per piece (the first also carries the role), a
 * final chunk with `finish_reason: "stop"`, a usage chunk (`choices: []`) when the request asked
 * for `stream_options.include_usage`, then `data: [DONE]`. With `reasoning`, its first
 * `reasoning.chunks` pieces are reasoning (in `delta.<field>` for each of its fields), the rest
 * content, as reasoning servers stream them. The fixed parts are built once.
 */
export class ChatChunkFormat implements StreamFormat {
  private readonly head: string;

  constructor(
    who: ChatIdentity,
    private readonly usage: ChatUsage | undefined,
    private readonly reasoning?: ChatReasoning,
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
    const text = JSON.stringify(piece);
    const fields =
      this.reasoning && index < this.reasoning.chunks
        ? this.reasoning.fields.map((field) => `"${field}":${text}`).join(',')
        : `"content":${text}`;
    return dataEvent(
      `${this.head}"choices":[{"index":0,"delta":{${role}${fields}},"logprobs":null,"finish_reason":null}]}`,
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
