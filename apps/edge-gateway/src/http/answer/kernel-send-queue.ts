import { readFile } from 'node:fs/promises';
import { isIPv4, isIPv6, type Socket } from 'node:net';
import { endianness } from 'node:os';

/**
 * How many bytes the kernel still holds to send on a TCP socket: written by the gateway, not yet
 * acknowledged by the client. A client that reads makes it shrink even when the socket never becomes
 * writable: Linux wakes a writer only once the free send space reaches half of what is queued
 * (tcp(7), `SO_SNDBUF`; `sk_stream_min_wspace`), so a client that reads a few hundred KB of a
 * multi-MB queue frees space without a `drain` event (docs/architecture.md, "HTTP surface").
 *
 * Read from the `tx_queue` column of `/proc/net/tcp` and `/proc/net/tcp6` (proc(5)), the tables of
 * the gateway's own network namespace: Node exposes no `SIOCOUTQ`. One read of both tables, at most
 * every {@link TABLE_TTL_MS} ms, serves every socket asked about meanwhile, so many stalled streams
 * cost one read, not one each; each socket's line is found with one search of the text (no table of
 * every connection is built). Elsewhere (no `/proc`, another OS) the answer is `undefined`.
 */
export class KernelSendQueues {
  private table?: Promise<string | undefined>;
  private readAt = 0;

  /** @param files the tables to read (tests may point elsewhere). @defaultValue the two /proc tables */
  constructor(private readonly files: readonly string[] = ['/proc/net/tcp', '/proc/net/tcp6']) {}

  /**
   * Bytes queued in the kernel for `socket` (≥ 0), or `undefined` when not known: the socket is
   * closed, not TCP, or the tables cannot be read. Never throws.
   */
  async of(socket: Socket | null | undefined): Promise<number | undefined> {
    if (!socket || socket.destroyed) return undefined;
    const key = socketKey(socket);
    if (key === undefined) return undefined;
    const text = await this.read();
    // "   0: <local>:<port> <remote>:<port> <st> <tx_queue>:<rx_queue> ..." (proc(5))
    const at = text?.indexOf(` ${key} `);
    if (text === undefined || at === undefined || at === -1) return undefined;
    const fields = text
      .slice(at + key.length + 2, text.indexOf('\n', at))
      .trim()
      .split(/\s+/);
    const tx = parseInt((fields[1] ?? '').split(':')[0], 16);
    return Number.isFinite(tx) ? tx : undefined;
  }

  private read(): Promise<string | undefined> {
    const now = performance.now();
    if (!this.table || now - this.readAt > TABLE_TTL_MS) {
      this.readAt = now;
      this.table = readTables(this.files);
    }
    return this.table;
  }
}

/** How long one read of the tables answers for, ms. */
const TABLE_TTL_MS = 100;

/** The process's one reader (its cache is shared by every stream). */
export const kernelSendQueues = new KernelSendQueues();

/** `<local hex address>:<port> <remote hex address>:<port>` as the tables print a connection, or undefined. */
function socketKey(socket: Socket): string | undefined {
  const { localAddress, localPort, remoteAddress, remotePort } = socket;
  if (!localAddress || !remoteAddress || localPort === undefined || remotePort === undefined) return undefined;
  const local = hexAddress(localAddress);
  const remote = hexAddress(remoteAddress);
  if (local === undefined || remote === undefined) return undefined;
  return `${local}:${hexPort(localPort)} ${remote}:${hexPort(remotePort)}`;
}

function hexPort(port: number): string {
  return port.toString(16).toUpperCase().padStart(4, '0');
}

/**
 * An address as the tables print it: the 4 (IPv4) or 16 (IPv6) bytes in 32-bit words, each word in
 * the host's byte order, `%08X`.
 */
function hexAddress(address: string): string | undefined {
  const bytes = addressBytes(address);
  if (!bytes) return undefined;
  const little = endianness() === 'LE';
  let out = '';
  for (let w = 0; w < bytes.length; w += 4) {
    const word = bytes.subarray(w, w + 4);
    for (let i = 0; i < 4; i++) out += word[little ? 3 - i : i].toString(16).toUpperCase().padStart(2, '0');
  }
  return out;
}

/** The bytes of an IPv4 or IPv6 address (with a zone or an embedded IPv4 tail), or undefined. */
function addressBytes(address: string): Uint8Array | undefined {
  const plain = address.split('%')[0];
  if (isIPv4(plain)) return Uint8Array.from(plain.split('.').map(Number));
  if (!isIPv6(plain)) return undefined;
  const groups = (part: string): number[] => {
    if (part === '') return [];
    const out: number[] = [];
    for (const g of part.split(':')) {
      if (isIPv4(g)) {
        const [a, b, c, d] = g.split('.').map(Number);
        out.push((a << 8) | b, (c << 8) | d);
      } else out.push(parseInt(g, 16));
    }
    return out;
  };
  const [head, tail] = plain.split('::');
  const front = groups(head);
  const back = tail === undefined ? [] : groups(tail);
  const words = [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
  const bytes = new Uint8Array(16);
  words.forEach((v, i) => {
    bytes[2 * i] = v >> 8;
    bytes[2 * i + 1] = v & 0xff;
  });
  return bytes;
}

/** Both tables' text, one after the other, or undefined when neither can be read. */
async function readTables(files: readonly string[]): Promise<string | undefined> {
  const texts = await Promise.all(files.map((f) => readFile(f, 'latin1').catch(() => undefined)));
  if (texts.every((t) => t === undefined)) return undefined;
  return texts.filter((t) => t !== undefined).join('\n');
}
