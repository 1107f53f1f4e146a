import { formatProblems } from './config-problem';
import { parseConfigText, type LoadResult } from './load-config';

const env = { EDGE_API_KEY: 'client-key-0001' };

function problemsOf(result: LoadResult) {
  if (result.ok) throw new Error('expected problems, the config loaded');
  return result.problems;
}

/**
 * README "Configuration": every problem names the setting it is about (a duplicate YAML key too),
 * and one mistake is one problem, not one per check the value breaks.
 */
describe('parseConfigText: each mistake once, at its path', () => {
  it.each([
    [
      'in a list item',
      'gateway:\n  clients:\n    - id: a\n      keys: [k1]\n      priority: 1\n      priority: 2\n',
      'gateway.clients[0].priority',
      6,
      7,
    ],
    ['in a flow map', 'nodes:\n  - { id: a, id: b }\n', 'nodes[0].id', 2, 14],
    ['at the top level', 'version: 1\nversion: 1\n', 'version', 2, 1],
  ])('names the config path of a duplicate key %s', (_where, text, path, line, column) => {
    const problems = problemsOf(parseConfigText(text, env, 'dupkey.yaml'));
    expect(problems).toEqual([
      expect.objectContaining({ path, line, column, message: 'YAML syntax error: Map keys must be unique' }),
    ]);
    expect(formatProblems('dupkey.yaml', problems)).toContain(
      `dupkey.yaml:${line}:${column} ${path}: YAML syntax error`,
    );
  });

  it.each([
    ['a listen address that is not host:port', 'listen: "abc"', {}, 'gateway.listen', 'has the wrong format'],
    ['an empty API key', 'api_keys: [""]', {}, 'gateway.api_keys[0]', 'cannot be empty'],
    ['an unset variable', 'listen: ${LISTEN}', {}, 'gateway.listen', 'environment variable LISTEN is not set'],
  ])('reports %s once, not once per check it breaks', (_what, setting, extraEnv, path, message) => {
    const text = `version: 1\ngateway:\n  ${setting}\nnodes: [{ id: a }]\n`;
    expect(problemsOf(parseConfigText(text, { ...env, ...extraEnv }))).toEqual([
      expect.objectContaining({ path, message: expect.stringContaining(message) }),
    ]);
  });

  it('reports an unset ${REDIS_URL} once: not set, never also "not a Redis URL"', () => {
    const text = 'version: 1\nqueue:\n  redis_url: ${REDIS_URL}\nnodes: [{ id: a }]\n';
    expect(problemsOf(parseConfigText(text, env))).toEqual([
      expect.objectContaining({
        path: 'queue.redis_url',
        message: 'environment variable REDIS_URL is not set',
      }),
    ]);
  });

  it('still reports a port out of range, once, when the format is right', () => {
    expect(
      problemsOf(parseConfigText('version: 1\ngateway:\n  listen: "1.2.3.4:99999"\nnodes: [{ id: a }]\n', env)),
    ).toEqual([expect.objectContaining({ path: 'gateway.listen', fix: 'the port must be from 0 to 65535.' })]);
  });
});
