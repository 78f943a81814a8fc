import { describe, expect, it } from 'vitest';
import { captureIo } from '../../test/helpers/io.js';
import { runCli } from '../program.js';

describe('adv agent', () => {
  /** Exit code and stderr of `adv agent` with these flags (no enrollment token: it never gets far). */
  const start = async (...flags: string[]) => {
    const io = captureIo();
    const code = await runCli(
      ['agent', '--controller', 'http://127.0.0.1:9', '--name', 'desk', ...flags],
      io,
    );
    return { code, err: io.err() };
  };
  const repeat = (flag: string, n: number, value: (i: number) => string) =>
    Array.from({ length: n }, (_, i) => [flag, value(i)]).flat();

  it('refuses a policy or labels the controller would refuse, before it detects or sends anything', async () => {
    expect(await start(...repeat('--accept-run', 65, (i) => `r${i}-*`))).toMatchObject({
      code: 2,
      err: expect.stringContaining('at most 64 --accept-run are accepted'),
    });
    expect(await start('--deny-run', 'x'.repeat(254))).toMatchObject({
      code: 2,
      err: expect.stringContaining('is longer than 253 characters'),
    });
    expect(await start('--label', 'room=b 12')).toMatchObject({
      code: 2,
      err: expect.stringContaining('--label "room=b 12" is not key=value'),
    });
    expect(await start(...repeat('--label', 33, (i) => `k${i}=v`))).toMatchObject({
      code: 2,
      err: expect.stringContaining('at most 32 --label are accepted'),
    });
  });
});
