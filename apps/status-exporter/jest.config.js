/** @type {import('jest').Config} */
module.exports = {
  ...require('../../jest.preset.js'),
  displayName: 'status-exporter',
  rootDir: __dirname,
};
