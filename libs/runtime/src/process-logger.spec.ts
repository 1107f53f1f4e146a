import { closeSync, mkdtempSync, openSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createProcessLogger, flushLogs, LOG_BUFFER_BYTES, LOG_FLUSH_MS } from './process-logger';

/** The JSON lines written to `file` so far. */
function linesOf(file: string): { msg: string }[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as { msg: string });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('the process logger (batched lines)', () => {
  let file: string;
  let fd: number;
  beforeEach(() => {
    file = path.join(mkdtempSync(path.join(tmpdir(), 'logger-')), 'out.log');
    fd = openSync(file, 'w');
  });
  afterEach(() => closeSync(fd));

  it('holds a few lines, then writes them within the flush interval while nothing else is logged', async () => {
    const logger = createProcessLogger('test-service', 'info', fd);
    logger.info('one');
    logger.info('two');
    expect(linesOf(file)).toEqual([]);
    await sleep(LOG_FLUSH_MS * 2 + 100);
    expect(linesOf(file).map((l) => l.msg)).toEqual(['one', 'two']);
  });

  it('writes without waiting once the held lines pass the buffer size', async () => {
    const logger = createProcessLogger('test-service', 'info', fd);
    const line = 'x'.repeat(200);
    const count = Math.ceil(LOG_BUFFER_BYTES / 200) + 1;
    for (let i = 0; i < count; i++) logger.info(line);
    // The write is asynchronous: wait for it, well within the flush interval. The batch that passed
    // the size went; the lines after it wait for the next batch or the interval.
    await sleep(LOG_FLUSH_MS / 5);
    expect(readFileSync(file).length).toBeGreaterThanOrEqual(LOG_BUFFER_BYTES);
    expect(linesOf(file).length).toBeLessThan(count);
    await sleep(LOG_FLUSH_MS * 2 + 100);
    expect(linesOf(file).length).toBe(count);
  });

  it('flushLogs writes what is held at once (the orderly exit)', async () => {
    const logger = createProcessLogger('test-service', 'info', fd);
    logger.info('stopped');
    await flushLogs(logger);
    expect(linesOf(file).map((l) => l.msg)).toEqual(['stopped']);
  });
});
