import { existsSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VERSION } from '../../controller/index.js';
import { captureIo, removeTree } from '../../test/helpers/io.js';
import { runCli } from '../program.js';

const ROOT = join(import.meta.dirname, '..', '..');
let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-python-cli-'));
});
afterAll(() => removeTree(tmp));

describe('adv python', () => {
  it('path prints the source dir, --project the dir pip installs', async () => {
    const io = captureIo();
    expect(await runCli(['python', 'path'], io)).toBe(0);
    expect(io.out()).toBe(`${join(ROOT, 'runtime', 'python', 'src')}\n`);
    expect(existsSync(join(io.out().trim(), 'adventuretime', '__init__.py'))).toBe(true);
    const project = captureIo();
    expect(await runCli(['python', 'path', '--project'], project)).toBe(0);
    expect(project.out()).toBe(`${join(ROOT, 'runtime', 'python')}\n`);
  });

  it('wheel without an interpreter to build it says so, and how else to install', async () => {
    const io = captureIo({}, tmp);
    const code = await runCli(['python', 'wheel', '--out', 'w', '--python', join(tmp, 'no-python')], io);
    expect(code).not.toBe(0);
    expect(io.err()).toContain(`${join(tmp, 'no-python')} was not found`);
    expect(io.err()).toContain(`pip install ${join(ROOT, 'runtime', 'python')}`);
    expect(existsSync(join(tmp, 'w', `adventuretime-${VERSION}-py3-none-any.whl`))).toBe(false);
  });
});
