import nx from '@nx/eslint-plugin';

/**
 * Tests, test helpers and scripted scenarios: they may also use the test tools (the fake upstream),
 * which production code never does.
 */
const TEST_FILES = ['**/*.spec.ts', '**/*.e2e.ts', '**/testing/**/*.ts', '**/e2e/**/*.ts', '**/chaos/**/*.ts'];

/**
 * Module boundaries (docs/architecture.md "Layering"), on the two axes every project.json tags:
 * - `type:` app | lib | tool | e2e: apps import libs only; libs import libs only, never an app or
 *   a tool; tools import libs and tools; e2e projects drive built apps and import libs and tools.
 * - `scope:` gateway | exporter | errors | validate | dispatch | status | runtime | testing | bench | fleet |
 *   docs: the libs' own layering, status → dispatch → validate → errors: `scope:errors` (the error
 *   catalog, `@iop/errors`) depends on nothing and every lib and app may use it; `scope:runtime`
 *   (`@iop/runtime`, the processes' start-up and shutdown) sits above them: it may use validate and
 *   errors, apps and tools may use it, no lib below it may; `scope:testing` (the fake upstream) only
 *   from tests.
 */
const boundaries = (appsMayUse) => [
  'error',
  {
    enforceBuildableLibDependency: false,
    allow: [],
    depConstraints: [
      { sourceTag: 'type:app', onlyDependOnLibsWithTags: appsMayUse },
      { sourceTag: 'type:lib', onlyDependOnLibsWithTags: ['type:lib'] },
      { sourceTag: 'type:tool', onlyDependOnLibsWithTags: ['type:lib', 'type:tool'] },
      { sourceTag: 'type:e2e', onlyDependOnLibsWithTags: ['type:lib', 'type:tool'] },
      { sourceTag: 'scope:errors', onlyDependOnLibsWithTags: [] },
      { sourceTag: 'scope:validate', onlyDependOnLibsWithTags: ['scope:errors'] },
      { sourceTag: 'scope:dispatch', onlyDependOnLibsWithTags: ['scope:validate', 'scope:errors'] },
      { sourceTag: 'scope:status', onlyDependOnLibsWithTags: ['scope:dispatch', 'scope:validate', 'scope:errors'] },
      { sourceTag: 'scope:runtime', onlyDependOnLibsWithTags: ['scope:validate', 'scope:errors'] },
    ],
  },
];

/** Lint for the whole workspace. */
export default [
  ...nx.configs['flat/base'],
  ...nx.configs['flat/typescript'],
  {
    ignores: [
      '**/dist',
      '**/node_modules',
      '**/.nx',
      'tmp/**',
      '**/jest.config.js',
      '**/jest.*.config.js',
      'jest.preset.js',
    ],
  },
  {
    files: ['**/*.ts'],
    rules: {
      '@nx/enforce-module-boundaries': boundaries(['type:lib']),
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  { files: TEST_FILES, rules: { '@nx/enforce-module-boundaries': boundaries(['type:lib', 'scope:testing']) } },
];
