import type { Endpoint } from '../../adapters/request-fields';
import type { ApiError } from '../../errors';

/** Bytes of the stream's end kept for {@link StreamTail}: at least {@link TAIL_CHARS} characters of UTF-8. */
const TAIL_BYTES = 256;
/** Characters of the stream's end the checks read (`[DONE]`, the blank line of the last event). */
const TAIL_CHARS = 64;
/** Characters of the last `data:` line the chat check reads, and the bytes that hold them. */
const DATA_CHARS = 24;
const DATA_BYTES = DATA_CHARS * 4;
const DATA = Buffer.from('data:');
/** Bytes of the chat end marker: a chunk without them is not read for it. */
const DONE = Buffer.from('[DONE]');
/** Where a Responses event's number starts, and the characters after it that hold the number. */
const SEQUENCE = '"sequence_number"';
const SEQUENCE_CHARS = 40;
/** A `data: [DONE]` line (any line ending, or the chunk's end: a marker cut short by the close). */
const DONE_LINE = /(?:^|[\r\n])data:[ \t]*\[DONE\][ \t]*(?:[\r\n]|$)/;

/**
 * What the gateway must remember of a stream it passes through, read from its last bytes and (for
 * Responses) its first event: whether the last event was cut short, whether a chat stream sent
 * `[DONE]`, the Responses stream's response object and last `sequence_number`. A chat chunk is not
 * decoded: the tail keeps the last chunks (at least {@link TAIL_BYTES} bytes of them) and where the
 * last `data:` line starts (one native search per chunk), and decodes them only when asked.
 */
export class StreamTail {
  /** The last chunks of the stream, oldest first, as few as hold {@link TAIL_BYTES} bytes. */
  private recent: Buffer[] = [];
  private recentBytes = 0;
  /** The chunk holding the last `data:` line seen, and where that line starts in it. */
  private dataChunk?: Buffer;
  private dataAt = 0;
  /** The start of the last event seen (Responses streams). */
  private lastEvent = '';
  private response?: Record<string, unknown>;
  private head = '';
  private sequence = -1;
  /** A chat stream's `data: [DONE]` line has passed: what follows it (a comment, a ping) is a trailer. */
  private done = false;

  constructor(private readonly endpoint: Endpoint) {}

  observe(chunk: Uint8Array | string): void {
    if (this.endpoint === 'responses') return this.observeEvents(chunk);
    const bytes =
      typeof chunk === 'string'
        ? Buffer.from(chunk, 'utf8')
        : Buffer.isBuffer(chunk)
          ? chunk
          : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    this.keep(bytes);
    if (!this.done && bytes.indexOf(DONE) !== -1) this.done = DONE_LINE.test(bytes.toString('latin1'));
    const at = bytes.lastIndexOf(DATA);
    if (at !== -1) {
      this.dataChunk = bytes;
      this.dataAt = at;
    }
  }

  /**
   * A chunk of a Responses stream, read where it must be and never copied whole: a translated
   * stream's closing events each carry the whole text (README "Streaming"), and one more copy of
   * them here would be one more copy of the text. Its last {@link TAIL_BYTES} bytes are kept, its
   * last event's start and last `sequence_number` are read in place (byte searches on a Buffer), and
   * only while the stream's response is not found yet is the chunk decoded for it.
   */
  private observeEvents(chunk: Uint8Array | string): void {
    if (typeof chunk === 'string') {
      this.keep(Buffer.from(chunk.length > TAIL_BYTES ? chunk.slice(-TAIL_BYTES) : chunk, 'utf8'));
      this.lastEvent = lastEventOf(chunk) ?? this.lastEvent;
      this.findResponse(chunk);
      const seqAt = chunk.lastIndexOf(SEQUENCE);
      if (seqAt !== -1) this.sequenceAt(chunk.slice(seqAt, seqAt + SEQUENCE_CHARS));
      return;
    }
    const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    this.keep(bytes.length > TAIL_BYTES ? Buffer.from(bytes.subarray(bytes.length - TAIL_BYTES)) : bytes);
    this.lastEvent = lastEventOfBytes(bytes) ?? this.lastEvent;
    if (this.response === undefined && this.head.length < 65_536) this.findResponse(bytes.toString('utf8'));
    const seqAt = bytes.lastIndexOf(SEQUENCE);
    if (seqAt !== -1) {
      this.sequenceAt(bytes.toString('utf8', seqAt, seqAt + 4 * SEQUENCE_CHARS).slice(0, SEQUENCE_CHARS));
    }
  }

  /** Keeps `bytes` among the last chunks, dropping those older than the last {@link TAIL_BYTES} bytes. */
  private keep(bytes: Buffer): void {
    this.recent.push(bytes);
    this.recentBytes += bytes.length;
    for (let oldest = this.recent[0]; this.recentBytes - oldest.length >= TAIL_BYTES; oldest = this.recent[0]) {
      this.recent.shift();
      this.recentBytes -= oldest.length;
    }
  }

  /** Reads the stream's response from its first chunks (the `response.created` event), until found. */
  private findResponse(text: string): void {
    if (this.response !== undefined || this.head.length >= 65_536) return;
    this.head += text;
    this.response = createdResponse(this.head);
  }

  /** Takes the number of a `"sequence_number": N` that starts `text`, when it does. */
  private sequenceAt(text: string): void {
    const n = /^"sequence_number"\s*:\s*(\d+)/.exec(text)?.[1];
    if (n !== undefined) this.sequence = Number(n);
  }

  /** The last {@link TAIL_CHARS} characters of the stream (each chunk decoded on its own, as it passed). */
  private get last(): string {
    let text = '';
    for (const bytes of this.recent) text += bytes.toString('utf8');
    return text.slice(-TAIL_CHARS);
  }

  /** The first {@link DATA_CHARS} characters of the last `data:` line seen ('' when none). */
  private get lastData(): string {
    const chunk = this.dataChunk;
    if (chunk === undefined) return '';
    return chunk.toString('utf8', this.dataAt, Math.min(chunk.length, this.dataAt + DATA_BYTES)).slice(0, DATA_CHARS);
  }

  /**
   * True when the stream ended as its format says a finished stream ends (chat: a `data: [DONE]`
   * line passed; bytes after it, a comment or a late event, change nothing).
   */
  finished(): boolean {
    return this.endpoint !== 'chat' || this.done || /data:\s*\[DONE\]\s*$/.test(this.last);
  }

  /**
   * True when the stream's last event is the upstream's own error event: chat's `data: {"error": …}`,
   * Responses' `error` or `response.failed` (the client has its error; nothing is added).
   */
  endedWithError(): boolean {
    if (this.endpoint === 'chat') return /^data:\s*\{\s*"error"/.test(this.lastData);
    if (this.endpoint !== 'responses') return false;
    const named = /^event:[ \t]*(\S+)/m.exec(this.lastEvent)?.[1];
    const type = named ?? /"type"\s*:\s*"([^"]+)"/.exec(this.lastEvent)?.[1];
    return type === 'error' || type === 'response.failed';
  }

  /**
   * The blank line an event cut short by the end of the stream is missing ('' when none is: the
   * stream ends with an empty line, whatever its line endings, LF, CRLF or CR).
   */
  closing(): string {
    const last = this.last;
    if (last === '' || endsWithBlankLine(last)) return '';
    // After an LF one more makes the empty line; after a lone CR an LF would only complete its CRLF,
    // so two are added, as after no line ending at all.
    return last.endsWith('\n') ? '\n' : '\n\n';
  }

  /** The events that end a failed stream of this endpoint. */
  errorEvents(error: ApiError): string {
    if (this.endpoint !== 'responses') return `data: ${JSON.stringify(error.toBody())}\n\n`;
    const { message, code, param } = error.toBody().error;
    let out = '';
    if (this.response) {
      const response = { ...this.response, status: 'failed', error: { code, message } };
      out += `event: response.failed\ndata: ${JSON.stringify({ type: 'response.failed', sequence_number: ++this.sequence, response })}\n\n`;
    }
    out += `event: error\ndata: ${JSON.stringify({ type: 'error', sequence_number: ++this.sequence, code, message, param })}\n\n`;
    return out;
  }
}

/** Length of the line ending (CRLF 2, LF or CR 1) that ends `text` at `end`, or 0. */
function lineEndingBefore(text: string, end: number): number {
  if (end >= 2 && text.endsWith('\r\n', end)) return 2;
  const c = text.charCodeAt(end - 1);
  return c === 10 || c === 13 ? 1 : 0;
}

/** True when `text` ends with an empty line: two line endings in a row, of any kinds (WHATWG HTML, "Server-sent events"). */
function endsWithBlankLine(text: string): boolean {
  const one = lineEndingBefore(text, text.length);
  return one > 0 && lineEndingBefore(text, text.length - one) > 0;
}

/** The first 256 characters of the last event in `text` (whole events, README "Streaming"); undefined when it holds none. */
function lastEventOf(text: string): string | undefined {
  let end = text.length;
  while (end > 0 && (text.charCodeAt(end - 1) === 10 || text.charCodeAt(end - 1) === 13)) end--;
  if (end === 0) return undefined;
  const body = text.slice(0, end);
  const at = Math.max(body.lastIndexOf('\n\n'), body.lastIndexOf('\r\r'), body.lastIndexOf('\n\r\n'));
  const start = at === -1 ? 0 : at;
  return body.slice(start, start + 256).replace(/^[\r\n]+/, '');
}

/**
 * {@link lastEventOf} of `bytes` decoded, read in place: the line breaks and blank lines are ASCII,
 * so they are found by byte searches, and only the event's first 256 characters are decoded (at most
 * 3 bytes each: a character of 4 bytes is 2 UTF-16 units).
 */
function lastEventOfBytes(bytes: Buffer): string | undefined {
  let end = bytes.length;
  while (end > 0 && (bytes[end - 1] === 10 || bytes[end - 1] === 13)) end--;
  if (end === 0) return undefined;
  const before = (blank: string) => (end < blank.length ? -1 : bytes.lastIndexOf(blank, end - blank.length, 'latin1'));
  const at = Math.max(before('\n\n'), before('\r\r'), before('\n\r\n'));
  const start = at === -1 ? 0 : at;
  return bytes
    .toString('utf8', start, Math.min(end, start + 3 * 256))
    .slice(0, 256)
    .replace(/^[\r\n]+/, '');
}

/** The `response` of a Responses stream's `response.created` event, once `head` holds all of it. */
function createdResponse(head: string): Record<string, unknown> | undefined {
  const at = head.indexOf('"response.created"');
  if (at === -1) return undefined;
  const lineStart = head.lastIndexOf('data:', at);
  const lineEnd = head.indexOf('\n', at);
  if (lineStart === -1 || lineEnd === -1) return undefined;
  try {
    const data = JSON.parse(head.slice(lineStart + 5, lineEnd)) as { response?: Record<string, unknown> };
    return typeof data.response === 'object' && data.response !== null ? data.response : {};
  } catch {
    return {};
  }
}
