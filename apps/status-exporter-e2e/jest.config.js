// The exporter's multi-process tests (`nx run status-exporter-e2e:test`, part of `npm test`): the
// built exporter and gateways (dist/apps/*/main.js) as OS processes on a real Redis, and the chaos
// run (`npm run chaos` runs it longer). The unit tests (`nx run status-exporter:test`) need no build.
/** @type {import('jest').Config} */
module.exports = {
  ...require('../../jest.preset.js'),
  displayName: 'status-exporter-e2e',
  rootDir: __dirname,
};
