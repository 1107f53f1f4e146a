import { isRedisUrl, parseListenAddress, parseRedisSentinelUrl, redactUrl } from './listen-address';

describe('parseListenAddress (listen settings)', () => {
  it.each([
    ['127.0.0.1:8080', { host: '127.0.0.1', port: 8080 }],
    ['[::1]:9464', { host: '::1', port: 9464 }],
    ['gateway.internal:0', { host: 'gateway.internal', port: 0 }],
  ])('parses %s', (text, expected) => {
    expect(parseListenAddress(text)).toEqual(expected);
  });
  it.each(['127.0.0.1', ':8080', '127.0.0.1:99999', 'http://h:80', 'h:-1'])(
    'rejects %s with how to write it',
    (text) => {
      expect(() => parseListenAddress(text)).toThrow(/host:port with a port from 0 to 65535/);
    },
  );
});

describe('isRedisUrl', () => {
  it.each([
    ['redis://127.0.0.1:6379', true],
    ['rediss://user:pw@redis.internal:6380/2', true],
    ['http://nope', false],
    ['garbage', false],
    ['redis://', false],
    ['redis://:pa/ss@host:6379', false],
    ['redis://:pa%2Fss@host:6379', true],
    ['redis+sentinel://s1:26379,s2:26380/mymaster', true],
    ['redis+sentinel://s1/mymaster', true],
    ['redis+sentinel://s1:26379', false],
    ['redis+sentinel://s1:99999/mymaster', false],
  ])('%s → %s', (text, expected) => {
    expect(isRedisUrl(text)).toBe(expected);
  });
});

describe('parseRedisSentinelUrl', () => {
  it("reads the Sentinels (26379 when no port), the master name and the data nodes' credentials", () => {
    expect(parseRedisSentinelUrl('redis+sentinel://edge:p%40ss@s1:26379,s2,[::1]:26380/my%20master')).toEqual({
      sentinels: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26379 },
        { host: '::1', port: 26380 },
      ],
      name: 'my master',
      username: 'edge',
      password: 'p@ss',
    });
    expect(parseRedisSentinelUrl('redis+sentinel://:secret@s1/m')).toEqual({
      sentinels: [{ host: 's1', port: 26379 }],
      name: 'm',
      password: 'secret',
    });
    expect(parseRedisSentinelUrl('redis://s1:6379/0')).toBeUndefined();
  });

  it('is printed without its credentials, hosts and name kept', () => {
    expect(redactUrl('redis+sentinel://edge:Top@Secret@s1:26379,s2:26380/mymaster')).toBe(
      'redis+sentinel://***@s1:26379,s2:26380/mymaster',
    );
  });
});

describe('redactUrl: every form of credential in a URL is hidden (README "Security")', () => {
  it('hides credentials and keeps the host', () => {
    expect(redactUrl('rediss://user:s3cret@redis.internal:6380/2')).toBe('rediss://***@redis.internal:6380/2');
    expect(redactUrl('redis://127.0.0.1:6379')).toBe('redis://127.0.0.1:6379');
  });
  it.each([
    ['a password alone, another scheme', 'http://:PW-s3cret@host:1/v1', 'http://***@host:1/v1', ['PW-s3cret']],
    [
      'a password holding "@"',
      'redis://:Top@Secret@redis.internal:6379',
      'redis://***@redis.internal:6379',
      ['Top', 'Secret'],
    ],
    [
      'a password holding "/"',
      'redis://:pa/ss-word@redis.internal:6379',
      'redis://***@redis.internal:6379',
      ['pa', 'ss-word'],
    ],
    [
      'a password holding "/" and digits (parses as a port otherwise)',
      'redis://u:12/ss@host',
      'redis://***@host',
      ['12', 'ss'],
    ],
    ['a password holding "?" and "#"', 'redis://u:a?b#c@host:6379', 'redis://***@host:6379', ['a?b', 'b#c']],
    [
      'a percent-encoded password',
      'rediss://edge:p%40ss%2Fw0rd@host:6380',
      'rediss://***@host:6380',
      ['p%40ss', 'w0rd'],
    ],
    [
      'a user and password in an IPv6 URL',
      'redis://user:pw-secret@[::1]:6379/0',
      'redis://***@[::1]:6379/0',
      ['pw-secret', 'user'],
    ],
    ['a token in the query', 'http://h:1/v1?token=SEC-RET&x=1', 'http://h:1/v1?token=***&x=***', ['SEC-RET']],
    ['a password in the query', 'redis://h:6379/?password=hunter22', 'redis://h:6379/?password=***', ['hunter22']],
    ['a fragment', 'http://h/v1#access_token=abc123', 'http://h/v1#***', ['abc123']],
    ['a port 80 is kept as written', 'redis://h:80', 'redis://h:80', []],
    ['text that is not a URL', 'my-secret-password', '***', ['my-secret-password']],
    [
      'a URL that does not parse after its userinfo',
      'redis://:pw-secret@host:notaport',
      'redis://***',
      ['pw-secret', 'notaport'],
    ],
  ])('%s', (_what, url, expected, hidden) => {
    const out = redactUrl(url);
    expect(out).toBe(expected);
    for (const secret of hidden) expect(out).not.toContain(secret);
  });
});
