import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnGateway, writeTempConfig, type GatewayProcess } from './testing/gateway-process';

/**
 * README "Streaming": a Responses stream translated from chat (here a CLI model's) sends its text
 * five times (the deltas and the four closing events the spec requires), but the gateway holds it
 * once, and each closing event is built when the client has taken the one before. Measured on a
 * gateway process of its own: the growth of its resident memory while it streams 40 MB of text.
 */
const TEXT_BYTES = 40_000_000;
const MB = 1_000_000;
/**
 * The most the gateway's resident memory may grow while it streams {@link TEXT_BYTES} of text: the
 * text held once, the closing event being sent and the one before it that the garbage collector has
 * not yet taken back; the usage watcher reads the final event without decoding its text (measured
 * at 40 MB: 172 MB, about 3 times the text + 50 MB; 550 MB before the text was held once, 290 MB
 * before the watchers stopped decoding the closing events, 212 MB before the usage watcher stopped
 * decoding the final one).
 */
const MAX_GROWTH_PER_TEXT_BYTE = 4;

const dir = mkdtempSync(join(tmpdir(), 'translated-stream-memory-'));
/** Reads a byte count on stdin, writes that many "x" in 64 KiB pieces (honouring backpressure), then exits 0. */
const WRITER = join(dir, 'writer.js');
writeFileSync(
  WRITER,
  `let input = '';
process.stdin.on('data', (d) => (input += d));
process.stdin.on('end', () => {
  const total = Number(input.trim());
  const piece = 'x'.repeat(65536);
  let sent = 0;
  const more = () => {
    while (sent < total) {
      const n = Math.min(piece.length, total - sent);
      sent += n;
      if (!process.stdout.write(n === piece.length ? piece : piece.slice(0, n))) return process.stdout.once('drain', more);
    }
  };
  more();
});`,
);

// No sandbox: the memory of the translation is measured, not bwrap (README "Security" covers it).
const yaml = `
version: 1
gateway: { request_timeout_ms: 60000, cli_sandbox: none }
nodes:
  - id: n
    adapters:
      - { id: big-cli, type: cli, command: ${JSON.stringify([process.execPath, WRITER])}, timeout_ms: 120000 }
    providers:
      - { id: big, category: cli, adapter: big-cli, models: [big] }
`;

/** A field of `/proc/<pid>/status` in bytes (`VmRSS`: resident now, `VmHWM`: its peak over the process's life). */
function procBytes(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const kb = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) * 1024;
}

describe('a translated Responses stream holds its text once (README "Streaming")', () => {
  let gateway: GatewayProcess;

  beforeAll(async () => {
    gateway = await spawnGateway(writeTempConfig(yaml));
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  /** Streams a CLI answer of `bytes` bytes through `/v1/responses`; returns the bytes received and the stream's end. */
  async function stream(bytes: number): Promise<{ status: number; received: number; tail: string }> {
    const res = await fetch(`${gateway.url}/v1/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'big', input: String(bytes), stream: true }),
    });
    let received = 0;
    let tail = '';
    for await (const value of res.body as unknown as AsyncIterable<Uint8Array>) {
      received += value.length;
      tail = (tail + Buffer.from(value.subarray(Math.max(0, value.length - 200))).toString('latin1')).slice(-200);
    }
    return { status: res.status, received, tail };
  }

  it(`streams ${TEXT_BYTES / MB} MB of CLI text with a memory growth bounded by the text`, async () => {
    const pid = gateway.child.pid as number;
    // Warm up (code loaded, pools made), then take the resident memory before the answer.
    for (let i = 0; i < 2; i++) await stream(1000);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const before = procBytes(pid, 'VmRSS');
    let sampled = before;
    const sampler = setInterval(() => (sampled = Math.max(sampled, procBytes(pid, 'VmRSS'))), 10);
    let res: Awaited<ReturnType<typeof stream>>;
    try {
      res = await stream(TEXT_BYTES);
    } finally {
      clearInterval(sampler);
    }
    expect(res.status).toBe(200);
    // The deltas and the four closing copies (README "Streaming"), and little else.
    expect(res.received).toBeGreaterThan(5 * TEXT_BYTES);
    expect(res.received).toBeLessThan(5 * TEXT_BYTES + 2 * MB);
    expect(res.tail).toMatch(/"tools":\[\]\}\}\n\n$/);
    const growth = Math.max(sampled, procBytes(pid, 'VmHWM')) - before;
    const limit = MAX_GROWTH_PER_TEXT_BYTE * TEXT_BYTES + 50 * MB;
    process.stdout.write(
      `translated stream of ${TEXT_BYTES / MB} MB: resident memory grew ${Math.round(growth / MB)} MB\n`,
    );
    expect(Math.round(growth / MB)).toBeLessThanOrEqual(Math.round(limit / MB));
  }, 60_000);
});
