// The deployment checks (`nx run fleet:test`, part of `npm test`): Dockerfile and its runtime stage,
// Kubernetes manifests, the CI workflow, Nx affected sets, the Grafana dashboard, the README's Errors
// table, and Debian's haproxy on deploy/haproxy/haproxy.cfg.
/** @type {import('jest').Config} */
module.exports = {
  ...require('../../jest.preset.js'),
  displayName: 'fleet',
  rootDir: __dirname,
  testMatch: ['<rootDir>/src/**/*.spec.ts'],
  testTimeout: 60000,
};
