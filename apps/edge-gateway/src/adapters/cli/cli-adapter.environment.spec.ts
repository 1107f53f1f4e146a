import { context, jsonBody, nodeScript } from '../../testing/cli-runs';
import { useCliAdapterRuns, cliAdapter, ask } from '../../testing/cli-adapter-runs';
import { cliEnvironment } from './cli-adapter';
import { RUN_MARKER } from './cli-process';

useCliAdapterRuns();

describe('CliAdapter', () => {
  describe('environment (README "Adapters": env over PATH, HOME, LANG, TZ; nothing else inherited)', () => {
    const printEnv = nodeScript('process.stdout.write(JSON.stringify(process.env))');

    it("passes the base and the adapter env only, never the gateway's secrets", async () => {
      process.env.UPSTREAM_SECRET_FOR_TEST = 'sk-upstream-secret';
      process.env.REDIS_URL_FOR_TEST = 'redis://:pw@h:6379';
      try {
        const body = jsonBody(
          await cliAdapter(printEnv, 10_000, { env: { MY_LLM_MODE: 'fast', HOME: '/srv/llm' } }).chat(
            ask('x'),
            context(),
          ),
        );
        const env = JSON.parse((body.choices as Array<{ message: { content: string } }>)[0].message.content) as Record<
          string,
          string
        >;
        const expected = Object.keys(cliEnvironment({ env: { MY_LLM_MODE: 'fast', HOME: '/srv/llm' } }));
        expect(Object.keys(env).sort()).toEqual([...expected, RUN_MARKER].sort());
        expect(env).toMatchObject({ MY_LLM_MODE: 'fast', HOME: '/srv/llm', PATH: process.env.PATH });
        expect(JSON.stringify(env)).not.toMatch(/sk-upstream-secret|redis:\/\//);
      } finally {
        delete process.env.UPSTREAM_SECRET_FOR_TEST;
        delete process.env.REDIS_URL_FOR_TEST;
      }
    });

    it('cliEnvironment takes only PATH, HOME, LANG and TZ from the gateway, when set', () => {
      expect(cliEnvironment({ env: { A: '1' } }, { PATH: '/bin', LANG: 'C.UTF-8', SECRET: 's', LC_ALL: 'C' })).toEqual({
        PATH: '/bin',
        LANG: 'C.UTF-8',
        A: '1',
      });
    });
  });
});
