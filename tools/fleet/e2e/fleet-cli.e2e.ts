import { freePort } from '@iop/dispatch/testing';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FLEET_CONFIG, WORKSPACE_ROOT } from '../src/local-fleet';

const FLEET_MAIN = path.join(WORKSPACE_ROOT, 'dist/tools/fleet/main.js');

/** `npm run fleet -- --config FILE` (README "Running a fleet"): the built tool as an operator runs it. */
describe('npm run fleet (dist/tools/fleet/main.js)', () => {
  it('--help documents --config', () => {
    const help = spawnSync(process.execPath, [FLEET_MAIN, '--help'], { encoding: 'utf8' });
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/--config FILE/);
  });

  it('refuses an invalid --config file before starting anything, with its problems', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'iop-fleet-cli-'));
    const file = path.join(dir, 'broken.yaml');
    writeFileSync(file, 'version: 1\nnodes:\n  - id: a\n    adapterz: []\n');
    const run = spawnSync(process.execPath, [FLEET_MAIN, '--config', file], { encoding: 'utf8', timeout: 30_000 });
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/broken\.yaml is invalid/);
    expect(run.stderr).toMatch(/broken\.yaml:4:5 nodes\[0\]\.adapterz/);
  });

  it("runs an operator's own file given as a path relative to where npm was run (INIT_CWD)", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'iop-fleet-cli-'));
    // The fleet's file with the pool renamed: a model only this file serves.
    const own = readFileSync(path.join(WORKSPACE_ROOT, FLEET_CONFIG), 'utf8').replaceAll('llama-3.1-8b', 'my-model');
    writeFileSync(path.join(dir, 'my.yaml'), own);
    const [port, exporterPort, statsPort] = [await freePort(), await freePort(), await freePort()];
    const child = spawn(
      process.execPath,
      [
        FLEET_MAIN,
        '--config',
        'my.yaml',
        '--port',
        String(port),
        '--exporter-port',
        String(exporterPort),
        '--stats-port',
        String(statsPort),
        '--log-dir',
        path.join(dir, 'logs'),
      ],
      { cwd: WORKSPACE_ROOT, env: { ...process.env, INIT_CWD: dir }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (c: Buffer) => {
          out += c.toString();
          const line = /^(http:\/\/\S+)$/m.exec(out);
          if (line) resolve(line[1]);
        });
        void exited.then((code) => reject(new Error(`the fleet exited (${code}):\n${stderr}`)));
      });
      expect(url).toBe(`http://127.0.0.1:${port}/v1`);
      expect(stderr).toContain(`fleet: config ${path.join(dir, 'my.yaml')}`);
      const res = await fetch(`${url}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'my-model', messages: [{ role: 'user', content: 'mine' }] }),
      });
      expect(res.status).toBe(200);
    } finally {
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    }
  });
});
