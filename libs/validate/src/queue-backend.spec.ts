import { describeQueueBackend, QueueBackendError, resolveQueueBackend } from './queue-backend';
import { edgeConfigSchema, type EdgeConfigInput } from './schema';

const withQueue = (queue: EdgeConfigInput['queue']) =>
  edgeConfigSchema.parse({ version: 1, queue, nodes: [{ id: 'a' }] });

const FILE = 'redis://file:6379';
const ENV = 'redis://env:6379';
const CLI = 'redis://cli:6379';

describe('resolveQueueBackend (README "Configuration": queue.backend, --redis, REDIS_URL)', () => {
  it.each([
    // A URL given to the process (command line or environment) selects redis, overriding the file.
    [
      'file memory + REDIS_URL → redis at REDIS_URL',
      { backend: 'memory' },
      { REDIS_URL: ENV },
      undefined,
      { backend: 'redis', redisUrl: ENV, source: 'REDIS_URL', reason: 'REDIS_URL overrides queue.backend: memory' },
    ],
    [
      'file memory + --redis → redis at --redis',
      { backend: 'memory' },
      {},
      CLI,
      { backend: 'redis', redisUrl: CLI, source: '--redis', reason: '--redis overrides queue.backend: memory' },
    ],
    [
      'file memory with its own URL + REDIS_URL → redis at REDIS_URL',
      { backend: 'memory', redis_url: FILE },
      { REDIS_URL: ENV },
      undefined,
      {
        backend: 'redis',
        redisUrl: ENV,
        source: 'REDIS_URL',
        reason: 'REDIS_URL overrides queue.backend: memory and queue.redis_url',
      },
    ],
    [
      'no backend + REDIS_URL → redis at REDIS_URL',
      {},
      { REDIS_URL: ENV },
      undefined,
      { backend: 'redis', redisUrl: ENV, source: 'REDIS_URL', reason: 'REDIS_URL is set' },
    ],
    [
      'no backend + --redis → redis at --redis',
      {},
      {},
      CLI,
      { backend: 'redis', redisUrl: CLI, source: '--redis', reason: '--redis is set' },
    ],
    // Precedence of the URL: command line, then environment, then file.
    [
      'file redis with a URL + REDIS_URL → REDIS_URL wins over the file',
      { backend: 'redis', redis_url: FILE },
      { REDIS_URL: ENV },
      undefined,
      { backend: 'redis', redisUrl: ENV, source: 'REDIS_URL', reason: 'REDIS_URL overrides queue.redis_url' },
    ],
    [
      'file URL + REDIS_URL + --redis → --redis wins over both',
      { redis_url: FILE },
      { REDIS_URL: ENV },
      CLI,
      { backend: 'redis', redisUrl: CLI, source: '--redis', reason: '--redis overrides REDIS_URL and queue.redis_url' },
    ],
    [
      'file memory + REDIS_URL + --redis → --redis',
      { backend: 'memory' },
      { REDIS_URL: ENV },
      CLI,
      {
        backend: 'redis',
        redisUrl: CLI,
        source: '--redis',
        reason: '--redis overrides REDIS_URL and queue.backend: memory',
      },
    ],
    // Without a URL from the process, the file decides.
    [
      'file redis with a URL → redis at the file URL',
      { backend: 'redis', redis_url: FILE },
      {},
      undefined,
      {
        backend: 'redis',
        redisUrl: FILE,
        source: 'queue.redis_url',
        reason: 'queue.backend: redis at queue.redis_url',
      },
    ],
    [
      'file URL, no backend → redis at the file URL',
      { redis_url: FILE },
      {},
      undefined,
      { backend: 'redis', redisUrl: FILE, source: 'queue.redis_url', reason: 'queue.redis_url is set' },
    ],
    [
      'file redis without any URL → the default redis://127.0.0.1:6379',
      { backend: 'redis' },
      {},
      undefined,
      {
        backend: 'redis',
        redisUrl: 'redis://127.0.0.1:6379',
        source: 'default',
        reason: 'queue.backend: redis and no --redis, REDIS_URL or queue.redis_url: the default URL',
      },
    ],
    [
      'no backend, no URL → memory',
      {},
      {},
      undefined,
      { backend: 'memory', reason: 'no --redis, REDIS_URL or queue.redis_url' },
    ],
    [
      'file memory, no URL → memory',
      { backend: 'memory' },
      {},
      undefined,
      { backend: 'memory', reason: 'queue.backend: memory' },
    ],
    [
      'file memory with its own URL → memory, and the reason says the URL is not used',
      { backend: 'memory', redis_url: FILE },
      {},
      undefined,
      { backend: 'memory', reason: 'queue.backend: memory; the queue.redis_url of the same file is not used' },
    ],
    // Empty values count as unset (how the benchmarks keep a memory target on memory).
    [
      'an empty REDIS_URL and an empty --redis count as unset',
      { backend: 'memory' },
      { REDIS_URL: '' },
      '',
      { backend: 'memory', reason: 'queue.backend: memory' },
    ],
  ] as const)('%s', (_rule, queue, env, cli, expected) => {
    expect(resolveQueueBackend(withQueue(queue), env, { redis: cli })).toEqual(expected);
  });

  it('reads the process environment when no env is given', () => {
    const saved = process.env['REDIS_URL'];
    process.env['REDIS_URL'] = ENV;
    try {
      expect(resolveQueueBackend(withQueue({ backend: 'memory' }))).toMatchObject({ backend: 'redis', redisUrl: ENV });
    } finally {
      if (saved === undefined) delete process.env['REDIS_URL'];
      else process.env['REDIS_URL'] = saved;
    }
  });

  it('refuses a REDIS_URL that is not a redis:// URL, naming the variable, password redacted', () => {
    const attempt = () => resolveQueueBackend(withQueue({}), { REDIS_URL: 'http://user:s3cret@h:6379' });
    expect(attempt).toThrow(QueueBackendError);
    expect(attempt).toThrow('REDIS_URL: "http://***@h:6379" is not a redis://, rediss:// or redis+sentinel:// URL');
  });

  it('refuses a --redis that is not a redis:// URL even when REDIS_URL is valid', () => {
    expect(() => resolveQueueBackend(withQueue({}), { REDIS_URL: ENV }, { redis: 'nope' })).toThrow(
      '--redis: "***" is not',
    ); // text that is no URL may be a bare password: never printed;
  });
});

describe('describeQueueBackend', () => {
  it('names the backend, the URL with its password redacted, and why', () => {
    const choice = resolveQueueBackend(withQueue({ backend: 'memory' }), {
      REDIS_URL: 'rediss://user:s3cret@redis.internal:6380/2',
    });
    expect(describeQueueBackend(choice)).toBe(
      'queue backend: redis at rediss://***@redis.internal:6380/2 (REDIS_URL overrides queue.backend: memory)',
    );
  });

  it('says memory and why', () => {
    expect(describeQueueBackend(resolveQueueBackend(withQueue({ backend: 'memory' }), {}))).toBe(
      'queue backend: memory (queue.backend: memory)',
    );
  });
});
