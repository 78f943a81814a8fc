/**
 * The bad-input corpus: every directory under test/fixtures/bad/ is a specs repo with something
 * wrong, and `expected.txt` beside it is the exact output it must produce (file:line:column, code,
 * message and fix). `UPDATE_GOLDEN=1 npx vitest run test/bad-specs.test.ts` rewrites the goldens;
 * review the diff like code.
 */
import { mkdtemp, readdir, readFile, writeFile, cp, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirectorySource, SpecLoader, formatDiagnostic, loadSpecs } from '../controller/index.js';
import { runCli } from '../cli/program.js';
import { captureIo } from './helpers/io.js';

const BAD = join(import.meta.dirname, 'fixtures', 'bad');
const SPECS = join(import.meta.dirname, '..', 'specs');
const cases = (await readdir(BAD, { withFileTypes: true }))
  .filter((d) => d.isDirectory())
  .map((d) => d.name)
  .sort();

async function render(dir: string): Promise<string> {
  const result = await loadSpecs(new DirectorySource(dir));
  return result.diagnostics.map(formatDiagnostic).join('\n') + '\n';
}

describe('bad spec corpus', () => {
  it('has at least 40 cases', () => {
    expect(cases.length).toBeGreaterThanOrEqual(40);
  });

  it.each(cases)('%s', async (name) => {
    const dir = join(BAD, name);
    const actual = await render(dir);
    const goldenFile = join(dir, 'expected.txt');
    if (process.env.UPDATE_GOLDEN || !existsSync(goldenFile)) await writeFile(goldenFile, actual);
    const expected = await readFile(goldenFile, 'utf8');
    expect(actual).toBe(expected);
    // Every case must produce at least one error, and every error must be located and fixable.
    const result = await loadSpecs(new DirectorySource(dir));
    const errors = result.diagnostics.filter((d) => d.severity === 'error');
    expect(errors.length).toBeGreaterThan(0);
    for (const e of errors) {
      expect(e.line).toBeGreaterThan(0);
      expect(e.column).toBeGreaterThan(0);
      expect(e.hint, `${name}: ${e.message} has no fix`).toBeTruthy();
    }
  });

  it.each(cases)('adv validate %s exits 1 with file:line:column', async (name) => {
    const io = captureIo();
    const code = await runCli(['validate', join(BAD, name)], io);
    expect(code).toBe(1);
    expect(io.out()).toMatch(/^\S+\.ya?ml:\d+:\d+: error\[\w+\]/m);
    expect(io.out()).toMatch(/fix: /);
  });
});

describe('one bad file never hides the others', () => {
  let repo: string;
  beforeAll(async () => {
    // The example specs repo plus every bad case, each in its own folder.
    repo = await mkdtemp(join(tmpdir(), 'adv-mixed-'));
    await cp(SPECS, repo, { recursive: true });
    for (const name of cases) await cp(join(BAD, name), join(repo, 'bad', name), { recursive: true });
  });
  afterAll(() => rm(repo, { recursive: true, force: true }));

  it('loads every good object and reports every bad file', async () => {
    const good = await loadSpecs(new DirectorySource(SPECS));
    const mixed = await loadSpecs(new DirectorySource(repo));
    const goodNames = good.objects.map((o) => `${o.kind}/${o.name}`);
    const mixedNames = new Set(mixed.objects.map((o) => `${o.kind}/${o.name}`));
    // The bad cases define a second Storage and duplicate names; the example repo's own objects
    // must survive except where a bad case collides with them by name.
    for (const n of goodNames) {
      if (n === 'Storage/default' || n === 'Backend/local') continue;
      expect(mixedNames.has(n), n).toBe(true);
    }
    const filesWithErrors = new Set(
      mixed.diagnostics.filter((d) => d.severity === 'error').map((d) => d.file.split('/')[1]),
    );
    for (const name of cases) expect(filesWithErrors.has(name), name).toBe(true);
  });
});

describe('bounded parsing', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'adv-bounds-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  const one = async (file: string, bytes: Uint8Array | string, limits = {}) => {
    const loader = new SpecLoader({ limits });
    loader.loadFile(file, typeof bytes === 'string' ? new TextEncoder().encode(bytes) : bytes, 'k');
    return loader.result().diagnostics;
  };

  it('refuses a file over the size limit without parsing it', async () => {
    const big = 'apiVersion: adventuretime.dev/v1alpha1\n' + '# padding\n'.repeat(200_000);
    const [d] = await one('big.yaml', big);
    expect(d).toMatchObject({ code: 'FileTooLarge', file: 'big.yaml', line: 1 });
    expect(d!.message).toBe(`file is ${big.length} bytes, over the limit of 1048576`);
  });

  it('honours a configured size limit', async () => {
    const [d] = await one('small.yaml', 'kind: Run\n'.repeat(20), { maxFileBytes: 100 });
    expect(d?.code).toBe('FileTooLarge');
  });

  it('refuses binary content', async () => {
    const [d] = await one('bin.yaml', new Uint8Array([0x6b, 0x3a, 0x20, 0x00, 0x01, 0x02]));
    expect(d).toMatchObject({
      code: 'BinaryFile',
      message: 'file contains a NUL byte at offset 3: it looks binary, not YAML',
    });
  });

  it('refuses non-UTF-8 text and names the line', async () => {
    const latin1 = new Uint8Array([...new TextEncoder().encode('a: 1\nb: caf'), 0xe9, 0x0a]);
    const [d] = await one('latin1.yaml', latin1);
    expect(d).toMatchObject({
      code: 'NotUtf8',
      line: 2,
      message: 'file is not valid UTF-8 (first bad byte at offset 11)',
    });
  });

  it('refuses too many documents per file', async () => {
    const docs = Array.from({ length: 101 }, (_, i) => `kind: Run\nmetadata: {name: r${i}}\n`).join('---\n');
    const [d] = await one('many.yaml', docs);
    expect(d).toMatchObject({
      code: 'TooManyDocuments',
      message: 'file has 101 YAML documents, over the limit of 100',
    });
  });

  it('turns an alias bomb into an error quickly', async () => {
    const levels = ['A: &a [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 1; i < 9; i++) {
      const prev = String.fromCharCode(97 + i - 1);
      const cur = String.fromCharCode(97 + i);
      levels.push(
        `${cur.toUpperCase()}: &${cur} [${Array(10)
          .fill('*' + prev)
          .join(', ')}]`,
      );
    }
    const diags = await one('bomb.yaml', levels.join('\n') + '\n');
    expect(diags.map((d) => d.code)).toEqual(['AliasLimit']);
  });

  it('refuses nesting deeper than the limit', async () => {
    const deep = 'a: ' + '['.repeat(100) + ']'.repeat(100) + '\n';
    const diags = await one('deep.yaml', deep);
    expect(diags[0]?.code).toBe('TooDeep');
  });
});
