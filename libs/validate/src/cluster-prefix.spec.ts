import { parseConfigText } from './load-config';
import { edgeConfigSchema, type EdgeConfigInput } from './schema';
import { checkSemantics } from './semantic-rules';

describe("queue.prefix with queue.cluster: the hash tags are the gateway's own", () => {
  const problemsOf = (queue: EdgeConfigInput['queue']) =>
    checkSemantics(edgeConfigSchema.parse({ version: 1, queue, nodes: [{ id: 'n' }] })).map(
      ({ path, message, fix }) => ({
        path,
        message,
        fix,
      }),
    );

  it.each(['iop{}', '{iop-edge}', 'iop{x}:a', 'a{b'])('refuses %s with cluster: true, with a fix', (prefix) => {
    expect(problemsOf({ prefix, cluster: true })).toEqual([
      {
        path: 'queue.prefix',
        message: expect.stringContaining("hash tags of the keys are the gateway's own"),
        fix: expect.stringMatching(/^remove the braces, e\.g\. prefix: [^{}]+\.$/),
      },
    ]);
  });

  it.each([
    ['a plain prefix with cluster: true', { prefix: 'iop-edge:prod', cluster: true }],
    ['a hash tag without cluster: one Redis has no slots', { prefix: '{iop-edge}', cluster: false }],
  ])('accepts %s', (_what, queue) => {
    expect(problemsOf(queue)).toEqual([]);
  });

  it('the loader reports it with its line and the fix, so the gateway never starts on it', () => {
    const loaded = parseConfigText(
      'version: 1\nqueue:\n  cluster: true\n  prefix: "iop{}"\nnodes:\n  - id: n\n',
      {},
      'edge.yaml',
    );
    expect(loaded.ok).toBe(false);
    if (loaded.ok) return;
    expect(loaded.problems).toEqual([
      expect.objectContaining({ path: 'queue.prefix', line: 4, fix: 'remove the braces, e.g. prefix: iop.' }),
    ]);
  });
});
