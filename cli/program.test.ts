import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { captureIo } from '../test/helpers/io.js';
import { runCli } from './program.js';

const specs = join(import.meta.dirname, '..', 'specs');

describe('adv', () => {
  it('validate specs/ exits 0 and summarises', async () => {
    const io = captureIo();
    expect(await runCli(['validate', specs], io)).toBe(0);
    expect(io.out()).toMatch(/^\d+ files, \d+ valid objects, 0 errors$/m);
  });

  it('validate -o json is machine-readable', async () => {
    const io = captureIo();
    expect(await runCli(['validate', specs, '-o', 'json'], io)).toBe(0);
    const out = JSON.parse(io.out()) as { valid: boolean; objects: { kind: string; name: string }[] };
    expect(out.valid).toBe(true);
    expect(out.objects).toContainEqual(expect.objectContaining({ kind: 'Run', name: 'hello' }));
  });

  it('validate of a missing path exits 3 and says so', async () => {
    const io = captureIo();
    expect(await runCli(['validate', '/nonexistent/specs'], io)).toBe(3);
    expect(io.err()).toContain('/nonexistent/specs: no such file or directory');
  });

  it('schema prints a kind, case-insensitively', async () => {
    const io = captureIo();
    expect(await runCli(['schema', 'run'], io)).toBe(0);
    expect(JSON.parse(io.out())).toMatchObject({ title: 'Run' });
  });

  it('schema of an unknown kind is a usage error with the list of kinds', async () => {
    const io = captureIo();
    expect(await runCli(['schema', 'Job'], io)).toBe(2);
    expect(io.err()).toContain('use one of Run, DAG, Backend, Storage');
  });

  it('schema --out writes every schema', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'adv-schema-'));
    const io = captureIo();
    expect(await runCli(['schema', '--out', dir], io)).toBe(0);
    expect((await readdir(dir)).sort()).toEqual([
      'alert.schema.json',
      'backend.schema.json',
      'dag.schema.json',
      'dataset.schema.json',
      'environment.schema.json',
      'provider.schema.json',
      'run.schema.json',
      'storage.schema.json',
      'sweep.schema.json',
    ]);
    await rm(dir, { recursive: true });
  });

  it('an unknown command is a usage error with a suggestion', async () => {
    const io = captureIo();
    expect(await runCli(['valdate'], io)).toBe(2);
    expect(io.err()).toContain('validate');
  });

  it('--help lists commands and examples', async () => {
    const io = captureIo();
    expect(await runCli(['--help'], io)).toBe(0);
    expect(io.out()).toContain('Examples:');
    expect(io.out()).toContain('validate');
  });

  it('version prints the package version', async () => {
    const io = captureIo();
    expect(await runCli(['version'], io)).toBe(0);
    expect(io.out()).toMatch(/^adv \d+\.\d+\.\d+/);
  });
});
