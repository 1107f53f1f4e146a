/**
 * A `.lua` file imported as its text (`import text from './admit.lua'`): esbuild's `text` loader in
 * the bundles (`loader` in each bundling project.json), `tools/jest/lua-transform.js` under jest;
 * every tsconfig sees this declaration through `files` in `tsconfig.base.json`.
 */
declare module '*.lua' {
  const text: string;
  export default text;
}
