// Jest transform for `.lua` files: a module whose export is the file's text, as esbuild's `text`
// loader gives the bundles (`import text from './admit.lua'`; see libs/dispatch/src/lua/lua-file.d.ts).
module.exports = {
  process(source) {
    return { code: `module.exports = ${JSON.stringify(source)};\n` };
  },
};
