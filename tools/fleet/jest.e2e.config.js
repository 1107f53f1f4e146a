// The local fleet's rolling-restart e2e (`nx run fleet:e2e`): Redis, 3 gateways, the exporter and
// HAProxy as real processes. Not part of `npm test` (it needs Debian's haproxy); .ci/run runs it.
/** @type {import('jest').Config} */
module.exports = {
  ...require('../../jest.preset.js'),
  displayName: 'fleet-e2e',
  rootDir: __dirname,
  testMatch: ['<rootDir>/e2e/**/*.e2e.ts'],
  testTimeout: 120000,
};
