// Jest globalSetup (jest.preset.js): every test run gets a scratch directory of its own as TMPDIR, so
// what tests and the processes they spawn write with os.tmpdir() (configs, sockets, profiles) lands in
// one place that temp-dir-teardown.js removes, instead of piling up in /tmp run after run.
const { mkdtempSync } = require('node:fs');
const { tmpdir } = require('node:os');
const path = require('node:path');

module.exports = async function setUpTempDir() {
  const dir = mkdtempSync(path.join(tmpdir(), 'iop-test-'));
  process.env.IOP_TEST_TMPDIR = dir;
  process.env.TMPDIR = dir;
};
