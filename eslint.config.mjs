import nx from '@nx/eslint-plugin';

/**
 * Lint for the whole workspace. The module-boundary rule enforces docs/architecture.md, "Layering":
 * apps → libs; status → dispatch → validate; no lib imports an app; tools stand alone.
 */
export default [
  ...nx.configs['flat/base'],
  ...nx.configs['flat/typescript'],
  { ignores: ['**/dist', '**/node_modules', '**/.nx', 'tmp/**', '**/jest.config.js', 'jest.preset.js'] },
  {
    files: ['**/*.ts'],
    rules: {
      '@nx/enforce-module-boundaries': [
        'error',
        {
          enforceBuildableLibDependency: false,
          allow: [],
          depConstraints: [
            { sourceTag: 'type:app', onlyDependOnLibsWithTags: ['type:lib', 'type:tool'] },
            { sourceTag: 'type:tool', onlyDependOnLibsWithTags: ['type:lib'] },
            { sourceTag: 'scope:validate', onlyDependOnLibsWithTags: [] },
            { sourceTag: 'scope:dispatch', onlyDependOnLibsWithTags: ['scope:validate'] },
            { sourceTag: 'scope:status', onlyDependOnLibsWithTags: ['scope:dispatch', 'scope:validate'] },
          ],
        },
      ],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
];
