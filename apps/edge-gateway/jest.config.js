/** @type {import('jest').Config} */
module.exports = {
  ...require('../../jest.preset.js'),
  displayName: 'edge-gateway',
  rootDir: __dirname,
};
