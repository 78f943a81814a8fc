import { describe, expect, it } from 'vitest';
import { captureIo } from '../../test/helpers/io.js';
import type { AgentSummary } from '../../runtime/agent/protocol.js';
import { runCli } from '../program.js';
import { showAgents } from './agent.js';

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

describe('adv get agents', () => {
  const good: AgentSummary = {
    name: 'desk-3',
    pools: ['desks'],
    labels: { room: 'b12' },
    capabilities: {
      hostname: 'desk-3.lab.example',
      cores: 2,
      ramGiB: 23.5,
      os: 'linux 6.8',
      node: 'v20.11.1',
      cuda: '12.4',
      gpus: [{ name: 'NVIDIA L4', vramGiB: 24 }],
    },
    state: 'Ready',
    enrolledAt: '2026-01-21T10:00:00.000Z',
    jobs: ['adv-r-1'],
  };
  const table = (agents: unknown[], output = 'table') => {
    const io = captureIo();
    showAgents(io, agents as AgentSummary[], output);
    return io.out();
  };

  it('shows the host name under HOST and the resources in their own columns', () => {
    const [head, row] = table([good]).split('\n');
    expect(head).toMatch(/^NAME +STATE +POOLS +HOST +CPUS +MEMORY +GPUS +CUDA +LAST SEEN +JOBS$/);
    expect(row).toMatch(
      /^desk-3 +Ready +desks +desk-3\.lab\.example +2 +23\.5 GiB +1× NVIDIA L4 \(24 GiB\) +12\.4 +never +adv-r-1$/,
    );
  });

  it('shows every agent when one record lacks a field or holds another type', () => {
    const { os: _os, ...noOs } = good.capabilities;
    const odd = [
      { ...good, name: 'no-os', capabilities: noOs },
      { ...good, name: 'cuda-number', capabilities: { ...good.capabilities, cuda: 12.4 } },
      { ...good, name: 'no-caps', capabilities: undefined, labels: undefined, pools: 'x', jobs: null },
      { ...good, name: 'odd-gpus', capabilities: { ...good.capabilities, gpus: [null], os: '\u001b[2J' } },
    ];
    for (const output of ['table', 'wide']) {
      const out = table([good, ...odd], output);
      expect(out.trim().split('\n')).toHaveLength(6);
      expect(out).toMatch(/^cuda-number .* 12\.4 /m);
      expect(out).toMatch(/^no-caps +Ready +x +- +- +- +none +- +never +-/m);
    }
    expect(table(odd, 'wide')).toMatch(/^odd-gpus .*1× - \(- GiB\).*\\x1b\[2J/m);
  });
});
