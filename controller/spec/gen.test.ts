import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { generatedFiles } from './gen.js';

const root = join(import.meta.dirname, '..', '..');

describe('generated artefacts', () => {
  it.each([...generatedFiles().keys()])(
    '%s matches schema.ts (run `npm run gen` after changing it)',
    async (rel) => {
      const onDisk = await readFile(join(root, rel), 'utf8');
      expect(onDisk).toBe(generatedFiles().get(rel));
    },
  );

  it('emits schemas a plain ajv (as editors and other tools use) accepts', () => {
    for (const [rel, content] of generatedFiles()) {
      if (!rel.endsWith('.json')) continue;
      const ajv = new Ajv({ strict: false });
      expect(() => ajv.compile(JSON.parse(content) as object), rel).not.toThrow();
    }
  });

  it('documents every field', () => {
    const missing: string[] = [];
    const walk = (node: Record<string, unknown>, path: string): void => {
      const props = node.properties as Record<string, Record<string, unknown>> | undefined;
      for (const [k, v] of Object.entries(props ?? {})) {
        if (!v.description) missing.push(`${path}.${k}`);
        walk(v, `${path}.${k}`);
        if (v.items && typeof v.items === 'object')
          walk(v.items as Record<string, unknown>, `${path}.${k}[]`);
      }
    };
    for (const [rel, content] of generatedFiles()) if (rel.endsWith('.json')) walk(JSON.parse(content), rel);
    expect(missing).toEqual([]);
  });

  it('writes a closed set of strings as an enum, not a union of literals (which reports only its first)', () => {
    const unions: string[] = [];
    const walk = (node: unknown, path: string): void => {
      if (!node || typeof node !== 'object') return;
      const anyOf = (node as { anyOf?: { const?: unknown }[] }).anyOf;
      if (anyOf?.length && anyOf.every((b) => 'const' in b)) unions.push(path);
      for (const [k, v] of Object.entries(node)) walk(v, `${path}/${k}`);
    };
    for (const [rel, content] of generatedFiles()) if (rel.endsWith('.json')) walk(JSON.parse(content), rel);
    expect(unions).toEqual([]);
  });
});
