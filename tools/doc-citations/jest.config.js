// The documentation checks (`nx run doc-citations:test`, part of `npm test`): every section a comment,
// a test title or a config file cites in README.md or docs/architecture.md is a heading there.
/** @type {import('jest').Config} */
module.exports = {
  ...require('../../jest.preset.js'),
  displayName: 'doc-citations',
  rootDir: __dirname,
};
