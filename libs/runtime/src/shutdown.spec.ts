import pino from 'pino';
import { Writable } from 'node:stream';
import { CloseList } from './close-list';
import { STOP_SIGNALS, stopOnSignals } from './shutdown';

describe('stopOnSignals', () => {
  let lines: Array<Record<string, unknown>>;
  let logger: pino.Logger;
  beforeEach(() => {
    lines = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
        done();
      },
    });
    logger = pino({ level: 'info' }, sink);
  });
  // No handler of a test outlives it: this process keeps its own SIGTERM and SIGINT.
  const listeners = () => STOP_SIGNALS.map((s) => process.listenerCount(s));
  let before: number[];
  beforeEach(() => (before = listeners()));
  afterEach(() => expect(listeners()).toEqual(before));

  it('on SIGTERM: logs the signal, drains, then runs the close list, logs what it closed, and resolves 0', async () => {
    const order: string[] = [];
    const toClose = new CloseList();
    toClose.add('queue', () => order.push('close queue'));
    const stopped = stopOnSignals({
      logger,
      toClose,
      stoppingMessage: 'shutting down: waiting for in-flight requests',
      drain: async () => {
        await new Promise((r) => setTimeout(r, 20));
        order.push('drained');
      },
    });
    process.emit('SIGTERM', 'SIGTERM');
    expect(await stopped).toBe(0);
    expect(order).toEqual(['drained', 'close queue']);
    expect(lines.map((l) => [l.msg, l.signal ?? l.closed])).toEqual([
      ['shutting down: waiting for in-flight requests', 'SIGTERM'],
      ['stopped', ['queue']],
    ]);
    process.emit('SIGINT', 'SIGINT');
  });

  it('stops once: a second signal (SIGINT after SIGTERM, or the other way round) changes nothing', async () => {
    const toClose = new CloseList();
    let closes = 0;
    toClose.add('server', () => closes++);
    const stopped = stopOnSignals({ logger, toClose });
    process.emit('SIGINT', 'SIGINT');
    process.emit('SIGTERM', 'SIGTERM');
    expect(await stopped).toBe(0);
    expect(closes).toBe(1);
    expect(lines.filter((l) => l.msg === 'shutting down')).toEqual([expect.objectContaining({ signal: 'SIGINT' })]);
  });
});
