import { isRedisUrl, parseListenAddress, redactUrl } from './listen-address';

describe('parseListenAddress (DESIGN §3 listen settings)', () => {
  it.each([
    ['127.0.0.1:8080', { host: '127.0.0.1', port: 8080 }],
    ['[::1]:9464', { host: '::1', port: 9464 }],
    ['gateway.internal:0', { host: 'gateway.internal', port: 0 }],
  ])('parses %s', (text, expected) => {
    expect(parseListenAddress(text)).toEqual(expected);
  });
  it.each(['127.0.0.1', ':8080', '127.0.0.1:99999', 'http://h:80', 'h:-1'])('rejects %s with how to write it', (text) => {
    expect(() => parseListenAddress(text)).toThrow(/host:port with a port from 0 to 65535/);
  });
});

describe('isRedisUrl', () => {
  it.each([
    ['redis://127.0.0.1:6379', true],
    ['rediss://user:pw@redis.internal:6380/2', true],
    ['http://nope', false],
    ['garbage', false],
    ['redis://', false],
  ])('%s → %s', (text, expected) => {
    expect(isRedisUrl(text)).toBe(expected);
  });
});

describe('redactUrl', () => {
  it('hides credentials and keeps the host', () => {
    expect(redactUrl('rediss://user:s3cret@redis.internal:6380/2')).toBe('rediss://***@redis.internal:6380/2');
    expect(redactUrl('redis://127.0.0.1:6379')).toBe('redis://127.0.0.1:6379');
  });
});
