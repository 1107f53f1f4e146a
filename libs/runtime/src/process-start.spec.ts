import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DESIGN_EXAMPLE_PATH } from '@iop/validate/testing';
import { gatewayEnvironmentSchema } from './environment';
import { commandLinePasswordWarning, readProcessStart } from './process-start';

const example = readFileSync(DESIGN_EXAMPLE_PATH, 'utf8');
const env = { EDGE_API_KEY: 'client-key-0001', VLLM_KEY: 'sk-vllm-secret-42' };

describe('readProcessStart', () => {
  let dir: string;
  let written: string;
  const stderr = { write: (text: string) => (written += text) };
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'process-start-'));
    written = '';
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const file = (text: string) => {
    const path = join(dir, 'edge.yaml');
    writeFileSync(path, text);
    return path;
  };

  it('returns the environment with defaults, the config, its hash and the env ${…} expands from', () => {
    const start = readProcessStart(gatewayEnvironmentSchema, { config: file(example) }, env, stderr);
    expect(start).toMatchObject({
      environment: { LOG_LEVEL: 'info', IOP_SHUTDOWN_GRACE_MS: 30_000 },
      hash: expect.stringMatching(/^[0-9a-f]{64}$/),
      env,
    });
    expect('config' in start && start.config.nodes.length).toBeGreaterThan(0);
    expect(written).toBe('');
  });

  it('hands `--redis` on as REDIS_URL for the file, over the environment', () => {
    const start = readProcessStart(
      gatewayEnvironmentSchema,
      { config: file(example), redis: 'redis://flag:6379' },
      { ...env, REDIS_URL: 'redis://env:6379' },
      stderr,
    );
    expect('env' in start && start.env.REDIS_URL).toBe('redis://flag:6379');
  });

  it('answers exit code 2 for a bad environment variable, naming it, before reading the file', () => {
    const start = readProcessStart(
      gatewayEnvironmentSchema,
      { config: join(dir, 'missing.yaml') },
      { ...env, IOP_SHUTDOWN_GRACE_MS: 'abc' },
      stderr,
    );
    expect(start).toEqual({ exitCode: 2 });
    expect(written).toMatch(
      /IOP_SHUTDOWN_GRACE_MS="abc": expected a whole number of milliseconds.*\nrefusing to start \(README "Environment variables"\)\n$/s,
    );
  });

  it('answers exit code 1 for an invalid file, with every problem, its line and a fix', () => {
    const path = file('version: 1\nnodes:\n  - id: a\n    adapterz: []\n');
    expect(readProcessStart(gatewayEnvironmentSchema, { config: path }, env, stderr)).toEqual({ exitCode: 1 });
    expect(written).toMatch(/edge\.yaml:4:5 nodes\[0\]\.adapterz: .*Fix:/);
    expect(written).toMatch(/refusing to start: .*edge\.yaml is invalid\n$/);
  });

  it.each([
    ['a password', 'redis://:Pw-s3cret-9@10.0.0.1:6379'],
    ['a user and a password', 'rediss://app:Pw-s3cret-9@10.0.0.1:6380'],
    ['a password the URL parser cannot read', 'redis://us/er:Pw-s3cret-9@10.0.0.1:1'],
  ])('warns on stderr of a --redis URL with %s, naming the safer ways and never the secret', (_what, redis) => {
    const start = readProcessStart(gatewayEnvironmentSchema, { config: file(example), redis }, env, stderr);
    expect('config' in start).toBe(true);
    expect(written).toContain('warning: --redis carries credentials');
    expect(written).toContain('REDIS_URL');
    expect(written).not.toContain('Pw-s3cret-9');
  });

  it('does not warn of a --redis URL without credentials, nor of REDIS_URL', () => {
    expect(commandLinePasswordWarning('redis://10.0.0.1:6379')).toBeUndefined();
    expect(commandLinePasswordWarning(undefined)).toBeUndefined();
    readProcessStart(
      gatewayEnvironmentSchema,
      { config: file(example) },
      { ...env, REDIS_URL: 'redis://:pw@10.0.0.1:6379' },
      stderr,
    );
    expect(written).toBe('');
  });
});
