import { responseTooLarge } from '../../errors';
import {
  buildMessageItem,
  buildReasoningItem,
  newId,
  type OutputItem,
  type OutputMessageItem,
  type ReasoningItem,
} from './response-object';

/** Deltas held one by one before they are joined into one flat piece. */
const HELD_DELTAS = 1024;
/** UTF-16 code units of deltas held one by one before they are joined into one flat piece. */
const PIECE_CHARS = 65_536;
/**
 * A character `JSON.stringify` may write otherwise than as itself (RFC 8259 section 7 and
 * ECMA-262 `QuoteJSONString`: `"`, `\\`, U+0000 to U+001F, a lone surrogate); a piece without
 * any is written as it is.
 */
// eslint-disable-next-line no-control-regex -- U+0000 to U+001F are the characters JSON escapes
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;

/**
 * The text of one item so far, held once (README "Streaming": a translated stream holds its text,
 * not copies of it): flat pieces of up to about {@link PIECE_CHARS} code units (deltas are joined
 * every {@link HELD_DELTAS} or {@link PIECE_CHARS}, since a string grown by `+=` one token at a time
 * keeps a node per token), never joined into one string. A piece never ends with the first half of
 * a surrogate pair (it goes on with the next piece), so each piece escaped on its own as a JSON
 * string (`JSON.stringify`, which escapes only a lone surrogate) gives the bytes the whole text
 * escaped at once gives. Each piece is looked at once, as it is joined: a piece with nothing to
 * escape ({@link ESCAPED}, most text) is later written as it is, with no escaped copy made.
 */
class HeldText {
  /** Stands for the text in the fields of a frame ({@link spliceTexts}): unguessable, so no client string can match it. */
  readonly standIn = `\u0000${newId('held-text-')}\u0000`;
  /** {@link standIn} as JSON (ASCII only: as many bytes as characters). */
  readonly marker = JSON.stringify(this.standIn);
  private pieces: string[] = [];
  /** Per piece: true when it has a character to escape. */
  private escapes: boolean[] = [];
  private recent: string[] = [];
  private recentChars = 0;
  /** Bytes of the pieces escaped as the inside of a JSON string, UTF-8. */
  private escapedBytes = 0;

  push(delta: string): void {
    this.recent.push(delta);
    this.recentChars += delta.length;
    if (this.recent.length >= HELD_DELTAS || this.recentChars >= PIECE_CHARS) this.settle(false);
  }

  /** The text is whole: nothing more is pushed. */
  finish(): void {
    this.settle(true);
  }

  /** Bytes of the text as a JSON string, quotes included, UTF-8 (once {@link finish}ed). */
  jsonBytes(): number {
    return this.escapedBytes + 2;
  }

  /** Writes the text as a JSON string, quotes included, into `out` at `offset`; returns the offset after it. */
  writeJson(out: Buffer, offset: number): number {
    let at = offset + out.write('"', offset, 'latin1');
    this.pieces.forEach((piece, i) => {
      at += out.write(this.escapes[i] ? JSON.stringify(piece).slice(1, -1) : piece, at, 'utf8');
    });
    return at + out.write('"', at, 'latin1');
  }

  /** The text is written for the last time: it is let go. */
  release(): void {
    this.pieces = [];
    this.escapes = [];
  }

  private settle(whole: boolean): void {
    if (this.recent.length === 0) return;
    let piece = this.recent.join('');
    this.recent = [];
    this.recentChars = 0;
    const last = piece.charCodeAt(piece.length - 1);
    if (!whole && last >= 0xd800 && last <= 0xdbff) {
      this.recent.push(piece.slice(-1));
      this.recentChars = 1;
      piece = piece.slice(0, -1);
    }
    if (piece === '') return;
    const escapes = ESCAPED.test(piece);
    this.pieces.push(piece);
    this.escapes.push(escapes);
    this.escapedBytes += escapes ? Buffer.byteLength(JSON.stringify(piece)) - 2 : Buffer.byteLength(piece);
  }
}

/**
 * One whole SSE frame as bytes: `skeleton` (a frame whose texts are their {@link HeldText.marker}s)
 * with each held text of `texts` its skeleton holds written in place of its marker, escaped as
 * `JSON.stringify` escapes it. The same bytes as the frame serialized with the texts themselves,
 * built in one buffer of the exact size: no serialized copy of a text but the frame itself.
 * @param skeleton the frame as `FrameWriter` writes it, each text's stand-in in place of the text.
 * @returns the frame's UTF-8 bytes.
 * @throws Error when a marker occurs more than once (never: a marker is 192 random bits).
 */
function spliceTexts(skeleton: string, texts: readonly HeldText[]): Buffer {
  const found: Array<{ at: number; text: HeldText }> = [];
  for (const text of texts) {
    const at = skeleton.indexOf(text.marker);
    if (at === -1) continue;
    if (skeleton.indexOf(text.marker, at + 1) !== -1) throw new Error('a held text is named twice in one frame');
    found.push({ at, text });
  }
  found.sort((a, b) => a.at - b.at);
  let size = Buffer.byteLength(skeleton);
  for (const { text } of found) size += text.jsonBytes() - text.marker.length;
  const out = Buffer.allocUnsafe(size);
  let offset = 0;
  let from = 0;
  for (const { at, text } of found) {
    offset += out.write(skeleton.slice(from, at), offset, 'utf8');
    offset = text.writeJson(out, offset);
    from = at + text.marker.length;
  }
  offset += out.write(skeleton.slice(from), offset, 'utf8');
  if (offset !== size) throw new Error(`a translated frame was ${offset} bytes, not the ${size} computed`);
  return out;
}

/** What an output item of a translated stream carries: the model's reasoning, or its answer. */
export type OutputKind = 'reasoning' | 'message';

/** One whole SSE frame of the stream for an event `type` and its fields (the caller numbers them). */
export type FrameWriter = (type: string, fields: Record<string, unknown>) => string;

/** A frame of a translated stream: text, or bytes for a frame that carries a held text ({@link StreamOutput}). */
export type Frame = string | Buffer;

/** A closed output item whose text is held: `item` names it by its stand-in ({@link StreamOutput.lastFrame}). */
interface ClosedItem {
  item: OutputItem;
  text: HeldText;
}

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
 * Memory (README "Streaming"): each item's text is held once ({@link HeldText}); a frame that
 * carries it is a Buffer of UTF-8 built from it when the reader asks for that frame, so one
 * serialized copy is made at a time; every other frame is a string.
 */
export class StreamOutput {
  private readonly closed: ClosedItem[] = [];
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
  *add(kind: OutputKind, delta: string): Generator<Frame> {
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
   * @returns (as the generator's return value) every output item, in order, for the final Response:
   *   each text in them is a stand-in, written by {@link textFrame}.
   */
  *finish(status: OutputMessageItem['status']): Generator<Frame, OutputItem[]> {
    if (this.open) yield* this.close(status);
    if (!this.closed.some(({ item }) => item.type === 'message')) {
      yield* this.start('message');
      yield* this.close(status);
    }
    return this.closed.map(({ item }) => item);
  }

  /**
   * The stream's last frame, of `type`, whose `fields` hold the output items of {@link finish}
   * (`response.completed` / `response.incomplete`), as bytes: each item's text written in place of
   * its stand-in, the same bytes as `frame` would give for the fields with the texts themselves, and
   * the only serialized copy of them (README "Streaming"). The texts are let go once it is built.
   */
  lastFrame(type: string, fields: Record<string, unknown>): Buffer {
    const texts = this.closed.map(({ text }) => text);
    const frame = spliceTexts(this.frame(type, fields), texts);
    for (const text of texts) text.release();
    return frame;
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

  /**
   * The item's closing frames, each built when the reader asks for it (after the one before was
   * written), so that one serialized copy of the text is alive at a time.
   */
  private *close(status: OutputMessageItem['status']): Generator<Frame> {
    const item = this.open as OpenItem;
    this.open = undefined;
    const { text } = item;
    text.finish();
    const done: ReasoningItem | OutputMessageItem =
      item.kind === 'message'
        ? buildMessageItem(item.id, text.standIn, status)
        : buildReasoningItem(item.id, text.standIn, status);
    const logprobs = item.kind === 'message' ? { logprobs: [] } : {};
    const held = [text];
    yield spliceTexts(
      this.frame(TEXT_EVENTS[item.kind].done, { ...position(item), text: text.standIn, ...logprobs }),
      held,
    );
    yield spliceTexts(this.frame('response.content_part.done', { ...position(item), part: done.content[0] }), held);
    yield spliceTexts(this.frame('response.output_item.done', { output_index: item.outputIndex, item: done }), held);
    this.closed.push({ item: done, text });
  }
}

/** `item_id`, `output_index` and `content_index` (always 0: one part per item) of an item's events. */
function position(item: OpenItem): { item_id: string; output_index: number; content_index: number } {
  return { item_id: item.id, output_index: item.outputIndex, content_index: 0 };
}

function partOf(kind: OutputKind, text: string): Record<string, unknown> {
  return kind === 'message' ? { type: 'output_text', text, annotations: [] } : { type: 'reasoning_text', text };
}
