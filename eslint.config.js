// Flat config: recommended JS + type-aware TypeScript rules for the project's own sources.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'coverage/', '.venv/', '**/*.js', '!eslint.config.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'off',
    },
  },
  // The package edges (docs/layout.md): cli/ sees the controller only through its barrel, the
  // barrel never re-exports internal/, and the controller never depends on the CLI.
  {
    files: ['cli/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/controller/**', '!**/controller/index.js'],
              message: 'cli/ imports the controller only through its barrel, controller/index.js.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['controller/**/*.ts'],
    ignores: ['controller/index.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/cli/**'], message: 'controller/ must not depend on cli/.' }] },
      ],
    },
  },
  // The worker side never depends on the control plane: adv exec and adv agent run on hosts that
  // carry no controller, and what both sides need lives in runtime/ (the arrow is controller → runtime).
  {
    files: ['runtime/**/*.ts'],
    ignores: ['runtime/**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/controller/**'],
              message: 'runtime/ never imports controller/: move what both need into runtime/.',
            },
            { group: ['**/cli/**'], message: 'runtime/ never imports cli/.' },
          ],
        },
      ],
    },
  },
  {
    files: ['controller/index.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['**/cli/**'], message: 'controller/ must not depend on cli/.' },
            { group: ['**/internal/**'], message: 'the barrel never re-exports internal/.' },
          ],
        },
      ],
    },
  },
  // Small pieces (docs/architecture.md): the pass reads top to bottom in one short file, and no
  // function of the controller grows past what a reader holds in mind at once.
  {
    files: ['controller/**/*.ts', 'runtime/**/*.ts', 'cli/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }],
    },
  },
  // No room too big to read: every production source file stays under 600 lines. Tests and
  // test/helpers are not production; no .ts file is generated (crds/*.json and docs/spec-reference.md
  // are, from controller/spec/schema.ts).
  {
    files: ['controller/**/*.ts', 'runtime/**/*.ts', 'cli/**/*.ts'],
    ignores: [
      '**/*.test.ts',
      // Not split yet, named so that it cannot grow unseen: spec/schema.ts is the one schema source
      // every part adds its fields to (capped below).
      'controller/spec/schema.ts',
    ],
    rules: { 'max-lines': ['error', { max: 600, skipBlankLines: false, skipComments: false }] },
  },
  // Room for the fields the open branches add, not for another kind: past this, split it first.
  {
    files: ['controller/spec/schema.ts'],
    rules: { 'max-lines': ['error', { max: 1200, skipBlankLines: false, skipComments: false }] },
  },
  {
    files: ['controller/controller.ts'],
    rules: { 'max-lines': ['error', { max: 400, skipBlankLines: false, skipComments: false }] },
  },
);
