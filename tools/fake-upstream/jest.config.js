/** @type {import('jest').Config} */
module.exports = {
  ...require('../../jest.preset.js'),
  displayName: 'fake-upstream',
  rootDir: __dirname,
};
