const LF = 0x0a;
const CR = 0x0d;
const BLANK_LINE = Buffer.from('\n\n');

/**
 * Cuts a Server-Sent Events byte stream at event boundaries, bytes unchanged (WHATWG HTML,
 * "Server-sent events", "Parsing an event stream": lines end with CRLF, LF or CR, and an event
 * ends at an empty line). {@link push} returns the bytes that end on a boundary and holds the rest
 * until its event is complete, so what passes on is whole events only, however the upstream's
 * writes or the network cut the stream. eventsource-parser parses events into fields; this keeps
 * their bytes as sent (comments, `id:`, `retry:`, spacing), which a pass-through must.
 * Cost: nothing for a chunk that ends an event with LF LF and follows a whole event (the common
 * case), one native search per chunk for other LF-only streams, a scan of the chunk's bytes when it
 * holds a CR.
 */
export class SseFramer {
  private held: Buffer[] = [];
  private heldLength = 0;
  /** The last byte seen ended a line (a fresh stream starts at a line start). */
  private atLineStart = true;
  /** The last byte seen was a CR: an LF next completes that line ending, it does not end another line. */
  private afterCr = false;
  /** That CR ended an event (an empty line): an LF next, in this read or the next, goes with that event. */
  private crEnded = false;

  /** Bytes held: the start of an event not finished yet. */
  get heldBytes(): number {
    return this.heldLength;
  }

  /**
   * Takes the next chunk of the stream.
   * @returns the whole events completed by `chunk` (what was held before, then the chunk up to its
   *   last event boundary), or undefined when `chunk` completes none; `chunk` itself when nothing
   *   was held and it ends on a boundary (no copy)
   */
  push(chunk: Buffer): Buffer | undefined {
    // The common case: a chunk of whole events (servers write one event per write). Two LFs end an
    // empty line whatever comes before them.
    const n = chunk.length;
    if (this.heldLength === 0 && !this.afterCr && n >= 2 && chunk[n - 1] === LF && chunk[n - 2] === LF) {
      this.atLineStart = true;
      return chunk;
    }
    const end = this.lastBoundary(chunk);
    if (end === -1) {
      if (chunk.length > 0) this.hold(chunk);
      return undefined;
    }
    let whole: Buffer;
    if (this.held.length === 0) whole = end === chunk.length ? chunk : chunk.subarray(0, end);
    else {
      this.held.push(chunk.subarray(0, end));
      whole = Buffer.concat(this.held, this.heldLength + end);
      this.held = [];
      this.heldLength = 0;
    }
    if (end < chunk.length) this.hold(chunk.subarray(end));
    return whole;
  }

  /** The bytes held at the end of the stream: an event it never finished ('' when none). */
  rest(): Buffer {
    return this.held.length === 1 ? this.held[0] : Buffer.concat(this.held, this.heldLength);
  }

  private hold(bytes: Buffer): void {
    this.held.push(bytes);
    this.heldLength += bytes.length;
  }

  /** The offset just past the last empty line `chunk` completes, or -1; keeps the line state for the next chunk. */
  private lastBoundary(chunk: Buffer): number {
    if (chunk.length === 0) return -1;
    if (!this.afterCr && chunk.indexOf(CR) === -1) {
      const at = chunk.lastIndexOf(BLANK_LINE);
      const end = at !== -1 ? at + 2 : this.atLineStart && chunk[0] === LF ? 1 : -1;
      this.atLineStart = chunk[chunk.length - 1] === LF;
      return end;
    }
    let end = -1;
    for (let i = 0; i < chunk.length; i++) {
      const byte = chunk[i];
      if (byte === LF) {
        if (this.afterCr) {
          // The LF of a CRLF: the line ended at the CR; an event it ended takes the LF along.
          this.afterCr = false;
          if (this.crEnded) end = i + 1;
        } else {
          if (this.atLineStart) end = i + 1;
          this.atLineStart = true;
        }
        this.crEnded = false;
      } else if (byte === CR) {
        this.crEnded = this.atLineStart;
        if (this.crEnded) end = i + 1;
        this.atLineStart = true;
        this.afterCr = true;
      } else {
        this.atLineStart = false;
        this.afterCr = false;
        this.crEnded = false;
      }
    }
    return end;
  }
}
