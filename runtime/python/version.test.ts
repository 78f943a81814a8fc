/**
 * The Python package is versioned with the CLI: pyproject.toml and `__version__` carry
 * package.json's version (the wheel's build writes it too; this catches a bump of one alone).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { VERSION } from '../version.js';
import { wheelName } from './wheel.js';

const read = (rel: string) => readFileSync(new URL(rel, import.meta.url), 'utf8');

describe('the adventuretime Python package version', () => {
  it("is package.json's in pyproject.toml", () => {
    expect(/^version = "([^"]+)"$/m.exec(read('./pyproject.toml'))?.[1]).toBe(VERSION);
  });

  it("is package.json's in adventuretime/__init__.py", () => {
    expect(/^__version__ = "([^"]+)"$/m.exec(read('./src/adventuretime/__init__.py'))?.[1]).toBe(VERSION);
  });

  it('names the wheel', () => {
    expect(wheelName('1.2.3')).toBe('adventuretime-1.2.3-py3-none-any.whl');
  });
});
