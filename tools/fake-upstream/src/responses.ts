import type { OpenAIErrorBody } from './errors';
import { namedEvent, type StreamFormat } from './sse';

/** Token counts in the Responses API shape. */
export interface ResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

/** Fields that name one response and its single output message. */
export interface ResponseIdentity {
  id: string;
  messageId: string;
  /** Unix seconds. */
  created_at: number;
  model: string;
}

/** A `response` object: `completed` with one assistant message, or `in_progress` with no output yet. */
export function responseObject(who: ResponseIdentity, text: string | undefined, usage: ResponsesUsage | null) {
  return {
    id: who.id,
    object: 'response',
    created_at: who.created_at,
    status: text === undefined ? 'in_progress' : 'completed',
    error: null,
    incomplete_details: null,
    model: who.model,
    output: text === undefined ? [] : [messageItem(who.messageId, text)],
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: [],
    usage,
  };
}

function messageItem(id: string, text: string | undefined) {
  return {
    id,
    type: 'message',
    status: text === undefined ? 'in_progress' : 'completed',
    role: 'assistant',
    content: text === undefined ? [] : [outputText(text)],
  };
}

function outputText(text: string) {
  return { type: 'output_text', text, annotations: [] };
}

/**
 * Responses API SSE: `response.created`, `response.in_progress`, `response.output_item.added`,
 * `response.content_part.added`, one `response.output_text.delta` per content piece, then
 * `response.output_text.done`, `response.content_part.done`, `response.output_item.done`,
 * `response.completed`. Every event has an `event:` line and a `sequence_number`. No `[DONE]`,
 * as with OpenAI. The in-band error is `event: error` carrying both the Responses API fields
 * (`code`, `message`, `param`) and the OpenAI `error` object.
 */
export class ResponsesEventFormat implements StreamFormat {
  private seq = 0;
  private readonly deltaHead: string;

  constructor(
    private readonly who: ResponseIdentity,
    private readonly text: string,
    private readonly usage: ResponsesUsage,
  ) {
    this.deltaHead = `"item_id":${JSON.stringify(who.messageId)},"output_index":0,"content_index":0`;
  }

  open(): string {
    const inProgress = responseObject(this.who, undefined, null);
    return (
      this.event('response.created', { response: inProgress }) +
      this.event('response.in_progress', { response: inProgress }) +
      this.event('response.output_item.added', { output_index: 0, item: messageItem(this.who.messageId, undefined) }) +
      this.event('response.content_part.added', { ...this.part(), part: outputText('') })
    );
  }

  delta(piece: string): string {
    const type = 'response.output_text.delta';
    return namedEvent(
      type,
      `{"type":"${type}","sequence_number":${this.seq++},${this.deltaHead},"delta":${JSON.stringify(piece)},"logprobs":[]}`,
    );
  }

  close(): string {
    return (
      this.event('response.output_text.done', { ...this.part(), text: this.text, logprobs: [] }) +
      this.event('response.content_part.done', { ...this.part(), part: outputText(this.text) }) +
      this.event('response.output_item.done', { output_index: 0, item: messageItem(this.who.messageId, this.text) }) +
      this.event('response.completed', { response: responseObject(this.who, this.text, this.usage) })
    );
  }

  error(body: OpenAIErrorBody): string {
    const { code, message, param } = body.error;
    return this.event('error', { code, message, param, ...body });
  }

  private part() {
    return { item_id: this.who.messageId, output_index: 0, content_index: 0 };
  }

  private event(type: string, fields: object): string {
    return namedEvent(type, JSON.stringify({ type, sequence_number: this.seq++, ...fields }));
  }
}
