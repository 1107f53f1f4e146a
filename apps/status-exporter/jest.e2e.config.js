// The dashboard e2e in headless Chromium (`nx run status-exporter:e2e`; the process tests are the
// project status-exporter-e2e); not part of `npm test`,
// which needs no browser. Matches only e2e/**/*.e2e.ts.
/** @type {import('jest').Config} */
module.exports = {
  ...require('../../jest.preset.js'),
  displayName: 'status-exporter-dashboard',
  rootDir: __dirname,
  testMatch: ['<rootDir>/e2e/**/*.e2e.ts'],
  testTimeout: 60000,
};
