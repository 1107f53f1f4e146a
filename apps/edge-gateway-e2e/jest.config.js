// The gateway's multi-process tests (`nx run edge-gateway-e2e:test`, part of `npm test`): each
// spawns the built gateway (dist/apps/edge-gateway/main.js) as its own OS process, often with
// Redis and several replicas. The unit tests (`nx run edge-gateway:test`) need no build.
/** @type {import('jest').Config} */
module.exports = {
  ...require('../../jest.preset.js'),
  displayName: 'edge-gateway-e2e',
  rootDir: __dirname,
};
