import pino from 'pino';
import { Writable } from 'node:stream';
import { consoleLibLogger, silentLibLogger, type LibLogger } from './lib-logger';

describe("LibLogger, the libs' one logger shape", () => {
  it('takes a pino logger as it is, errors logged as { err } objects with message and stack', () => {
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
        done();
      },
    });
    const logger: LibLogger = pino({ level: 'info' }, sink);
    logger.warn({ err: new Error('ECONNREFUSED'), reason: 'commands' }, 'redis queue: Redis unreachable');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 40,
      msg: 'redis queue: Redis unreachable',
      reason: 'commands',
      err: { type: 'Error', message: 'ECONNREFUSED' },
    });
    expect((lines[0].err as { stack: string }).stack).toContain('ECONNREFUSED');
  });

  it('writes warnings and errors to the console with the error message, drops info', () => {
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    const error = jest.spyOn(console, 'error').mockImplementation(() => undefined);
    const info = jest.spyOn(console, 'info').mockImplementation(() => undefined);
    try {
      consoleLibLogger.warn({ err: new Error('boom') }, 'subscribe failed');
      consoleLibLogger.error({}, 'plain');
      consoleLibLogger.info({}, 'dropped');
      silentLibLogger.error({ err: new Error('x') }, 'dropped too');
      expect(warn.mock.calls).toEqual([['subscribe failed: boom']]);
      expect(error.mock.calls).toEqual([['plain']]);
      expect(info).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
      error.mockRestore();
      info.mockRestore();
    }
  });
});
