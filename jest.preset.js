// Shared jest settings: TypeScript through @swc/jest (no type-check at test time; `typecheck` does that),
// `.lua` files as their text (as esbuild's `text` loader in the bundles), workspace libraries mapped to
// their sources so tests never need a build of a lib.
const path = require('node:path');

const root = __dirname;
module.exports = {
  testEnvironment: 'node',
  transform: {
    '^.+\\.ts$': [
      '@swc/jest',
      { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' }, module: { type: 'commonjs' } },
    ],
    '^.+\\.lua$': path.join(root, 'tools/jest/lua-transform.js'),
  },
  moduleFileExtensions: ['ts', 'js', 'json', 'lua'],
  moduleNameMapper: {
    '^@iop/errors$': path.join(root, 'libs/errors/src/index.ts'),
    '^@iop/validate$': path.join(root, 'libs/validate/src/index.ts'),
    '^@iop/validate/testing$': path.join(root, 'libs/validate/src/testing/index.ts'),
    '^@iop/runtime$': path.join(root, 'libs/runtime/src/index.ts'),
    '^@iop/dispatch$': path.join(root, 'libs/dispatch/src/index.ts'),
    '^@iop/dispatch/testing$': path.join(root, 'libs/dispatch/src/testing/index.ts'),
    '^@iop/status$': path.join(root, 'libs/status/src/index.ts'),
    '^@iop/status/testing$': path.join(root, 'libs/status/src/testing/index.ts'),
    '^@iop/fake-upstream$': path.join(root, 'tools/fake-upstream/src/index.ts'),
  },
  testMatch: ['**/*.spec.ts'],
  // One scratch TMPDIR per run, removed at its end (tools/jest/temp-dir-setup.js).
  globalSetup: path.join(root, 'tools/jest/temp-dir-setup.js'),
  globalTeardown: path.join(root, 'tools/jest/temp-dir-teardown.js'),
  // Multi-process and Redis tests start real servers; each waits on events with its own deadline.
  testTimeout: 30000,
};
