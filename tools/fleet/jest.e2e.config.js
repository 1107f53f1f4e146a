// The local fleet's e2e (`nx run fleet:e2e`): a rolling restart, real faults (Redis paused, a replica
// SIGKILLed) and the command line, with Redis, 3 gateways, the exporter and HAProxy as real processes.
// Not part of `npm test` (it takes about a minute); .ci/run runs it.
/** @type {import('jest').Config} */
module.exports = {
  ...require('../../jest.preset.js'),
  displayName: 'fleet-e2e',
  rootDir: __dirname,
  testMatch: ['<rootDir>/e2e/**/*.e2e.ts'],
  testTimeout: 120000,
};
