import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { Writable } from 'node:stream';
import { DESIGN_EXAMPLE_PATH } from '@iop/validate/testing';
import { CloseList } from './close-list';
import { exporterEnvironmentSchema, gatewayEnvironmentSchema } from './environment';
import { STOP_SIGNALS } from './shutdown';
import { announceListening, startService } from './service-start';

const env = { EDGE_API_KEY: 'client-key-0001', VLLM_KEY: 'sk-vllm-secret-42' };

describe('startService', () => {
  let dir: string;
  let written: string;
  const stderr = { write: (text: string) => (written += text) };
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'service-start-'));
    written = '';
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("returns the process start with a logger at the environment's LOG_LEVEL", () => {
    const file = join(dir, 'edge.yaml');
    writeFileSync(file, readFileSync(DESIGN_EXAMPLE_PATH, 'utf8'));
    const start = startService(
      'edge-gateway',
      gatewayEnvironmentSchema,
      { config: file },
      {
        ...env,
        LOG_LEVEL: 'debug',
      },
    );
    if ('exitCode' in start) throw new Error(`no start: ${written}`);
    expect(start.environment.LOG_LEVEL).toBe('debug');
    expect(start.logger.level).toBe('debug');
    expect(start.config.nodes.length).toBeGreaterThan(0);
  });

  it("ends with readProcessStart's exit codes: 2 for a bad environment variable, 1 for an invalid file", () => {
    const file = join(dir, 'edge.yaml');
    writeFileSync(file, 'version: 1\nnodes: nope\n');
    expect(
      startService('status-exporter', exporterEnvironmentSchema, { config: file }, { LOG_LEVEL: 'loud' }, stderr),
    ).toEqual({ exitCode: 2 });
    expect(startService('status-exporter', exporterEnvironmentSchema, { config: file }, {}, stderr)).toEqual({
      exitCode: 1,
    });
  });
});

describe('announceListening', () => {
  const listeners = () => STOP_SIGNALS.map((s) => process.listenerCount(s));

  it('installs the stop handlers before it writes "<service> listening on <url>", and resolves 0 once stopped', async () => {
    const before = listeners();
    const silent = pino({ level: 'silent' }, new Writable({ write: (_chunk, _enc, done) => done() }));
    const lines: Array<{ text: string; handlers: number[] }> = [];
    const stopped = announceListening(
      'status-exporter',
      'http://127.0.0.1:9464',
      { logger: silent, toClose: new CloseList() },
      { write: (text: string) => lines.push({ text, handlers: listeners() }) },
    );
    expect(lines).toEqual([
      { text: 'status-exporter listening on http://127.0.0.1:9464\n', handlers: before.map((n) => n + 1) },
    ]);
    process.emit('SIGTERM', 'SIGTERM');
    expect(await stopped).toBe(0);
    process.emit('SIGINT', 'SIGINT');
    expect(listeners()).toEqual(before);
  });
});
