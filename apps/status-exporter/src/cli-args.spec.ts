import { parseExporterArgs, USAGE } from './cli-args';

/** README "Queue backend", "Redis requirements": every Redis URL the exporter takes, and `--help` naming each. */
describe('the exporter command line and its Redis URLs', () => {
  it.each([
    ['redis://', 'redis://10.0.0.1:6379'],
    ['rediss://', 'rediss://edge:pw@redis.internal:6380'],
    ['redis+sentinel://', 'redis+sentinel://s1:26379,s2:26379/mymaster'],
  ])('takes %s and --help names it, for --redis and for REDIS_URL', (scheme, url) => {
    expect(parseExporterArgs(['--config', 'edge.yaml', '--redis', url])).toMatchObject({ redis: url });
    expect(USAGE.match(new RegExp(scheme.replace(/[+/]/g, '\\$&'), 'g'))?.length).toBeGreaterThanOrEqual(2);
  });

  it('refuses another scheme, naming the three it takes', () => {
    expect(() => parseExporterArgs(['--config', 'edge.yaml', '--redis', 'http://10.0.0.1:6379'])).toThrow(
      'is not a redis://, rediss:// or redis+sentinel:// URL',
    );
  });
});
