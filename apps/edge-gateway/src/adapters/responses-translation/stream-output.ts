import { responseTooLarge } from '../../errors';
import {
  buildMessageItem,
  buildReasoningItem,
  newId,
  type OutputItem,
  type OutputMessageItem,
  type ReasoningItem,
} from './response-object';

/** Deltas held one by one before they are joined into one flat string. */
const HELD_DELTAS = 1024;

/**
 * The text of one item so far, flat: deltas are joined every {@link HELD_DELTAS}, since a string
 * grown by `+=` one token at a time keeps a node per token (several times the text's own size).
 */
class HeldText {
  private held: string[] = [];
  private recent: string[] = [];

  push(piece: string): void {
    this.recent.push(piece);
    if (this.recent.length >= HELD_DELTAS) {
      this.held.push(this.recent.join(''));
      this.recent = [];
    }
  }

  text(): string {
    return this.held.join('') + this.recent.join('');
  }
}

/** What an output item of a translated stream carries: the model's reasoning, or its answer. */
export type OutputKind = 'reasoning' | 'message';

/** One whole SSE frame of the stream for an event `type` and its fields (the caller numbers them). */
export type FrameWriter = (type: string, fields: Record<string, unknown>) => string;

interface OpenItem {
  kind: OutputKind;
  id: string;
  outputIndex: number;
  text: HeldText;
}

/** The event names of each kind's text (OpenAI API reference, "Streaming events"). */
const TEXT_EVENTS: Record<OutputKind, { delta: string; done: string }> = {
  reasoning: { delta: 'response.reasoning_text.delta', done: 'response.reasoning_text.done' },
  message: { delta: 'response.output_text.delta', done: 'response.output_text.done' },
};

/**
 * The output items of a translated Responses stream and their events (OpenAI API reference,
 * "Streaming events"), in `output_index` order, each with one content part (`content_index` 0):
 * - a `reasoning` item (`rs_…`) for the model's reasoning: `response.output_item.added`,
 *   `response.content_part.added` (a `reasoning_text` part), `response.reasoning_text.delta` per
 *   delta, then `response.reasoning_text.done`, `response.content_part.done`, `response.output_item.done`;
 * - a `message` item (`msg_…`) for the answer: the same with an `output_text` part and
 *   `response.output_text.delta` / `.done` (with `logprobs: []`).
 * An item opens at the first delta of its kind and closes when a delta of the other kind arrives or
 * the stream ends; every item has all its text in its closing events. The stream always ends with a
 * message item (an empty one when the model answered nothing), as a non-streamed Response does.
 * Items closed by the next item are `completed`; those still open at the end take the Response's status.
 * The text held for the closing events (reasoning and answer together, UTF-8) is capped at
 * `maxTextBytes`: past it `add` throws {@link responseTooLarge} (502, not booked).
 */
export class StreamOutput {
  private readonly closed: OutputItem[] = [];
  private open: OpenItem | undefined;
  private textBytes = 0;

  constructor(
    private readonly frame: FrameWriter,
    private readonly maxTextBytes: number,
  ) {}

  /**
   * The frames for one non-empty `delta` of `kind`: the previous item's closing events and the new
   * item's opening events when the kind changes, then the delta's event.
   * @throws UpstreamError 502 (not booked) once the text held passes `maxTextBytes`.
   */
  *add(kind: OutputKind, delta: string): Generator<string> {
    this.textBytes += Buffer.byteLength(delta);
    if (this.textBytes > this.maxTextBytes)
      throw responseTooLarge(this.maxTextBytes, `translated Responses stream: text over ${this.maxTextBytes} bytes`);
    if (this.open?.kind !== kind) {
      if (this.open) yield* this.close('completed');
      yield* this.start(kind);
    }
    const item = this.open as OpenItem;
    item.text.push(delta);
    const logprobs = kind === 'message' ? { logprobs: [] } : {};
    yield this.frame(TEXT_EVENTS[kind].delta, { ...position(item), delta, ...logprobs });
  }

  /**
   * The closing frames: the open item's, then an empty message item's when the stream had none.
   * @returns (as the generator's return value) every output item, in order, for the final Response.
   */
  *finish(status: OutputMessageItem['status']): Generator<string, OutputItem[]> {
    if (this.open) yield* this.close(status);
    if (!this.closed.some((item) => item.type === 'message')) {
      yield* this.start('message');
      yield* this.close(status);
    }
    return this.closed;
  }

  private *start(kind: OutputKind): Generator<string> {
    const item: OpenItem = {
      kind,
      id: newId(kind === 'message' ? 'msg_' : 'rs_'),
      outputIndex: this.closed.length,
      text: new HeldText(),
    };
    this.open = item;
    const empty =
      kind === 'message'
        ? { ...buildMessageItem(item.id, '', 'in_progress'), content: [] }
        : { ...buildReasoningItem(item.id, '', 'in_progress'), content: [] };
    yield this.frame('response.output_item.added', { output_index: item.outputIndex, item: empty });
    yield this.frame('response.content_part.added', { ...position(item), part: partOf(kind, '') });
  }

  private *close(status: OutputMessageItem['status']): Generator<string> {
    const item = this.open as OpenItem;
    this.open = undefined;
    const text = item.text.text();
    const done: ReasoningItem | OutputMessageItem =
      item.kind === 'message' ? buildMessageItem(item.id, text, status) : buildReasoningItem(item.id, text, status);
    const logprobs = item.kind === 'message' ? { logprobs: [] } : {};
    yield this.frame(TEXT_EVENTS[item.kind].done, { ...position(item), text, ...logprobs });
    yield this.frame('response.content_part.done', { ...position(item), part: done.content[0] });
    yield this.frame('response.output_item.done', { output_index: item.outputIndex, item: done });
    this.closed.push(done);
  }
}

/** `item_id`, `output_index` and `content_index` (always 0: one part per item) of an item's events. */
function position(item: OpenItem): { item_id: string; output_index: number; content_index: number } {
  return { item_id: item.id, output_index: item.outputIndex, content_index: 0 };
}

function partOf(kind: OutputKind, text: string): Record<string, unknown> {
  return kind === 'message' ? { type: 'output_text', text, annotations: [] } : { type: 'reasoning_text', text };
}
