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
 * - `scope:` gateway | exporter | shared | validate | dispatch | status | testing | bench | fleet | docs:
 *   the libs' own layering, status → dispatch → validate; `scope:shared` (`@iop/runtime`, the
 *   processes' start-up and shutdown) sits above them: it may use validate, apps and tools may use it,
 *   no lib below it may; `scope:testing` (the fake upstream) only from tests.
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
      { sourceTag: 'scope:shared', onlyDependOnLibsWithTags: ['scope:validate'] },
      { sourceTag: 'scope:validate', onlyDependOnLibsWithTags: [] },
      { sourceTag: 'scope:dispatch', onlyDependOnLibsWithTags: ['scope:validate'] },
      { sourceTag: 'scope:status', onlyDependOnLibsWithTags: ['scope:dispatch', 'scope:validate'] },
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
