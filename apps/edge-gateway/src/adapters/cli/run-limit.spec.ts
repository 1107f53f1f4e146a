import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiError } from '../../errors';
import { cliConfig, cliHost, context, contentOf, nodeScript, sseText } from '../../testing/cli-runs';
import { startTestGateway } from '../../testing/gateway-harness';
import type { ChatRequest, ResponsesRequest } from '../adapter';
import { CliAdapter } from './cli-adapter';
import { RunLimit } from './run-limit';

describe('RunLimit (README "Adapters": max_concurrency, max_waiting)', () => {
  const signal = () => new AbortController().signal;

  it('grants max_concurrency runs at once, then hands each freed slot to the first waiter', async () => {
    const limit = new RunLimit('a', 2, 5);
    const first = await limit.acquire(signal());
    await limit.acquire(signal());
    const order: number[] = [];
    const waiting = [1, 2, 3].map((n) => limit.acquire(signal()).then((release) => (order.push(n), release)));
    expect([limit.inFlight, limit.queued]).toEqual([2, 3]);
    first();
    first(); // a second call of the same release does nothing
    const release1 = await waiting[0];
    expect([limit.inFlight, limit.queued]).toEqual([2, 2]);
    // A newcomer while the slot is handed over must not take it: it waits behind the others.
    const late = limit.acquire(signal()).then(() => order.push(4));
    release1();
    await waiting[1];
    expect(order).toEqual([1, 2]);
    expect(limit.inFlight).toBe(2);
    void late;
  });

  it('refuses one more than max_waiting at once with 429 rate_limit_exceeded and Retry-After', async () => {
    const limit = new RunLimit('busy-cli', 1, 1);
    await limit.acquire(signal());
    void limit.acquire(signal());
    const refused = await limit.acquire(signal()).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ApiError);
    expect(refused).toMatchObject({ status: 429, code: 'rate_limit_exceeded', retryAfterS: 1 });
    expect((refused as Error).message).toContain('adapter "busy-cli"');
    expect(limit.queued).toBe(1);
  });

  it('max_waiting 0 refuses at once when every run is taken', async () => {
    const limit = new RunLimit('a', 1, 0);
    await limit.acquire(signal());
    await expect(limit.acquire(signal())).rejects.toMatchObject({ status: 429 });
  });

  it('a request whose signal aborts leaves the line with the abort reason', async () => {
    const limit = new RunLimit('a', 1, 3);
    const release = await limit.acquire(signal());
    const gone = new AbortController();
    const waiting = limit.acquire(gone.signal);
    const next = limit.acquire(signal());
    const reason = new Error('client went away');
    gone.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    expect(limit.queued).toBe(1);
    release();
    await next;
    expect(limit.inFlight).toBe(1);
  });

  it('close() refuses every waiting request', async () => {
    const limit = new RunLimit('a', 1, 3);
    await limit.acquire(signal());
    const waiting = limit.acquire(signal());
    const stop = new Error('stopping');
    limit.close(stop);
    await expect(waiting).rejects.toBe(stop);
  });

  it.each([
    [0, 1],
    [1.5, 1],
    [1, -1],
  ])('refuses max_concurrency %p with max_waiting %p', (concurrency, waiting) => {
    expect(() => new RunLimit('a', concurrency, waiting)).toThrow(/max_(concurrency|waiting)/);
  });
});

/**
 * Real programs in the default sandbox: each records its start and its end in a shared file
 * (appends are atomic), so the file tells how many ran at once.
 */
describe('a CLI adapter never runs more than max_concurrency programs (chat and Responses, stream and not)', () => {
  const RECORDS = `
const fs = require('node:fs');
const log = process.argv[1];
fs.appendFileSync(log, '+\\n');
setTimeout(() => {
  fs.appendFileSync(log, '-\\n');
  process.stdout.write('ran');
}, 150);
`;
  let dir = '';
  let adapters: CliAdapter[] = [];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'run-limit-'));
  });
  afterEach(async () => {
    await Promise.all(adapters.map((a) => a.close()));
    adapters = [];
    rmSync(dir, { recursive: true, force: true });
  });

  /** The most programs that ran at once, from the start/end records. */
  const peak = (log: string) => {
    let running = 0;
    let most = 0;
    for (const line of readFileSync(log, 'utf8').split('\n')) {
      running += line === '+' ? 1 : line === '-' ? -1 : 0;
      most = Math.max(most, running);
    }
    return most;
  };

  type Call = (adapter: CliAdapter) => Promise<string>;
  const calls: Record<string, Call> = {
    chat: async (a) => contentOf(await a.chat(chatReq(false), context())),
    'chat stream': async (a) => sseText(await a.chat(chatReq(true), context())),
    responses: async (a) => JSON.stringify(await a.responses(responsesReq(false), context())),
    'responses stream': async (a) => sseText(await a.responses(responsesReq(true), context())),
  };
  const chatReq = (stream: boolean): ChatRequest => ({
    model: 'm',
    messages: [{ role: 'user', content: 'x' }],
    stream,
  });
  const responsesReq = (stream: boolean): ResponsesRequest => ({ model: 'm', input: 'x', stream });

  it('runs 24 concurrent requests of every kind, at most 3 at once, all answered in turn', async () => {
    const log = join(dir, 'runs');
    const adapter = new CliAdapter(
      cliConfig(nodeScript(RECORDS, log), { max_concurrency: 3, max_waiting: 24 }),
      cliHost('bwrap'),
    );
    adapters.push(adapter);
    const kinds = Object.values(calls);
    const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => kinds[i % kinds.length](adapter)));
    expect(answers.every((a) => a.includes('ran'))).toBe(true);
    expect(peak(log)).toBe(3);
    expect(readFileSync(log, 'utf8').match(/\+/g)).toHaveLength(24);
  });

  it.each(Object.keys(calls))(
    '%s: past max_waiting, a request gets 429 at once and starts no program',
    async (kind) => {
      const log = join(dir, 'runs');
      const adapter = new CliAdapter(
        cliConfig(nodeScript(RECORDS, log), { max_concurrency: 2, max_waiting: 3 }),
        cliHost('bwrap'),
      );
      adapters.push(adapter);
      const outcomes = await Promise.all(
        Array.from({ length: 9 }, () =>
          calls[kind](adapter).then(
            () => 'ok',
            (e: unknown) => (e instanceof ApiError ? `${e.status} ${e.code} ${e.retryAfterS}` : String(e)),
          ),
        ),
      );
      expect(outcomes.filter((o) => o === 'ok')).toHaveLength(5);
      expect(outcomes.filter((o) => o === '429 rate_limit_exceeded 1')).toHaveLength(4);
      expect(peak(log)).toBe(2);
      expect(readFileSync(log, 'utf8').match(/\+/g)).toHaveLength(5);
    },
  );

  it('a legacy route and a catalog provider on one adapter share its bound, in a gateway', async () => {
    const log = join(dir, 'runs');
    const command = JSON.stringify(nodeScript(RECORDS, log));
    const gateway = await startTestGateway(`
version: 1
nodes:
  - id: n
    adapters:
      - { id: shared, type: cli, command: ${command}, max_concurrency: 1, max_waiting: 2 }
    providers:
      - { id: p, category: cli, adapter: shared, models: [catalog-model] }
routes:
  - { model: legacy-model, node: n, adapter: shared }
`);
    try {
      const post = (model: string, path: string, body: object) =>
        fetch(`${gateway.url}/v1/${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model, ...body }),
        }).then(async (res) => [res.status, res.headers.get('retry-after'), await res.text()] as const);
      const answers = await Promise.all([
        post('catalog-model', 'chat/completions', { messages: [{ role: 'user', content: 'x' }] }),
        post('legacy-model', 'chat/completions', { messages: [{ role: 'user', content: 'x' }], stream: true }),
        post('catalog-model', 'responses', { input: 'x' }),
        post('legacy-model', 'responses', { input: 'x', stream: true }),
        post('legacy-model', 'chat/completions', { messages: [{ role: 'user', content: 'x' }] }),
      ]);
      expect(answers.map(([status]) => status).sort()).toEqual([200, 200, 200, 429, 429]);
      for (const [status, retryAfter, body] of answers.filter(([status]) => status === 429)) {
        expect([status, retryAfter]).toEqual([429, '1']);
        expect(JSON.parse(body)).toMatchObject({ error: { code: 'rate_limit_exceeded', type: 'rate_limit_error' } });
      }
      expect(peak(log)).toBe(1);
    } finally {
      await gateway.close();
    }
  });
});
