import { resolveQueueBackend } from './queue-backend';
import { edgeConfigSchema, type EdgeConfigInput } from './schema';

const withQueue = (queue: EdgeConfigInput['queue']) => edgeConfigSchema.parse({ version: 1, queue, nodes: [{ id: 'a' }] });

describe('resolveQueueBackend (DESIGN §3 queue.backend default)', () => {
  it.each([
    ['uses memory when no URL is configured anywhere', {}, {}, { backend: 'memory' }],
    ['uses redis when queue.redis_url is set', { redis_url: 'redis://q:6379' }, {}, { backend: 'redis', redisUrl: 'redis://q:6379' }],
    ['uses redis when env REDIS_URL is set', {}, { REDIS_URL: 'redis://env:6379' }, { backend: 'redis', redisUrl: 'redis://env:6379' }],
    ['prefers queue.redis_url over env REDIS_URL', { redis_url: 'redis://q:6379' }, { REDIS_URL: 'redis://env:6379' }, { backend: 'redis', redisUrl: 'redis://q:6379' }],
    ['treats an empty REDIS_URL as unset', {}, { REDIS_URL: '' }, { backend: 'memory' }],
    ['keeps an explicit memory backend even with a URL', { backend: 'memory', redis_url: 'redis://q:6379' }, {}, { backend: 'memory' }],
    ['uses redis://127.0.0.1:6379 for an explicit redis backend without any URL', { backend: 'redis' }, {}, { backend: 'redis', redisUrl: 'redis://127.0.0.1:6379' }],
  ] as const)('%s', (_rule, queue, env, expected) => {
    expect(resolveQueueBackend(withQueue(queue), env)).toEqual(expected);
  });
});
