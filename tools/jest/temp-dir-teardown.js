// Jest globalTeardown (jest.preset.js): removes the run's scratch directory made by temp-dir-setup.js.
const { rmSync } = require('node:fs');

module.exports = async function tearDownTempDir() {
  const dir = process.env.IOP_TEST_TMPDIR;
  if (dir) rmSync(dir, { recursive: true, force: true });
};
