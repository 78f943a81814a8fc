import { describe, expect, it } from 'vitest';
import { distributedEnv, topologyFrom } from './dist-env.js';
import { parseExecArgs } from './exec-args.js';

const env = (e: Record<string, string>) => e as NodeJS.ProcessEnv;

describe('the distributed contract adv exec gives the workload', () => {
  it.each([
    [
      'one process: ranks, no JAX_* or MASTER_*',
      {},
      {},
      { RANK: '0', WORLD_SIZE: '1', LOCAL_RANK: '0', LOCAL_WORLD_SIZE: '1' },
    ],
    [
      'process 1 of 2, one per host',
      { process: '1', processes: '2' },
      { ADV_COORDINATOR_ADDRESS: 'node-0:8476', ADV_LOCAL_DEVICE_COUNT: '4' },
      {
        RANK: '1',
        WORLD_SIZE: '2',
        LOCAL_RANK: '0',
        LOCAL_WORLD_SIZE: '1',
        JAX_COORDINATOR_ADDRESS: 'node-0:8476',
        JAX_NUM_PROCESSES: '2',
        JAX_PROCESS_ID: '1',
        MASTER_ADDR: 'node-0',
        MASTER_PORT: '8477',
      },
    ],
    [
      'process 3 of 4, two per host with 2 devices each: its device ids',
      {},
      {
        ADV_PROCESS_ID: '3',
        ADV_NUM_PROCESSES: '4',
        ADV_COORDINATOR_ADDRESS: '[fd00::1]:29500',
        ADV_LOCAL_PROCESS_ID: '1',
        ADV_LOCAL_PROCESS_COUNT: '2',
        ADV_LOCAL_DEVICE_COUNT: '2',
      },
      {
        RANK: '3',
        WORLD_SIZE: '4',
        LOCAL_RANK: '1',
        LOCAL_WORLD_SIZE: '2',
        JAX_COORDINATOR_ADDRESS: '[fd00::1]:29500',
        JAX_NUM_PROCESSES: '4',
        JAX_PROCESS_ID: '3',
        JAX_LOCAL_DEVICE_IDS: '2,3',
        MASTER_ADDR: 'fd00::1',
        MASTER_PORT: '29501',
      },
    ],
  ])('%s', (_what, flags, vars, want) => {
    expect(distributedEnv(topologyFrom(flags, env(vars)))).toEqual(want);
  });

  it.each([
    [{ process: '2', processes: '2' }, {}, '--process 2 is not one of --processes 2 (0..1)'],
    [{ processes: '2' }, {}, 'a job of 2 processes needs $ADV_COORDINATOR_ADDRESS'],
    [{ processes: '2' }, { ADV_COORDINATOR_ADDRESS: 'node-0' }, 'is not host:port'],
    [{ processes: 'two' }, {}, '--processes (or $ADV_NUM_PROCESSES) takes a whole number ≥ 1'],
    [
      {},
      { ADV_LOCAL_PROCESS_ID: '2', ADV_LOCAL_PROCESS_COUNT: '2' },
      'is not below $ADV_LOCAL_PROCESS_COUNT',
    ],
  ])('refuses %j %j: %s', (flags, vars, message) => {
    expect(() => topologyFrom(flags, env(vars))).toThrow(message);
  });
});

describe('adv exec flags', () => {
  const parse = (args: string[], vars: Record<string, string> = {}) =>
    parseExecArgs(['--run', 'r', ...args, '--', 'true'], env(vars));

  it.each([
    [['--ckpt-mode', 'gang'], '--ckpt-mode takes per-process, shared or store, not "gang"'],
    [['--ckpt-mode', 'shared'], '--ckpt-mode shared needs --ckpt-dir DIR'],
    [['--ckpt-mode', 'store'], '--ckpt-mode store needs a store'],
    [
      ['--ckpt-mode', 'store', '--store', 'file:///s', '--ckpt-dir', '/d'],
      '--ckpt-dir does not go with --ckpt-mode store',
    ],
    [['--ckpt-dir', ''], '--ckpt-dir takes a directory'],
    [['--stop-signal', 'SIGKILL'], '--stop-signal takes SIGTERM, SIGINT, SIGUSR1, SIGUSR2, not "SIGKILL"'],
    [['--restore-wait', 'soon'], '--restore-wait takes a number of seconds > 0'],
    [['--processes', '0'], '--processes (or $ADV_NUM_PROCESSES) takes a whole number ≥ 1'],
  ])('%j: %s', (args, message) => {
    const r = parse(args);
    expect('error' in r && r.error).toContain(message);
  });

  it('takes the multi-host flags, and USR1 for SIGUSR1', () => {
    const r = parse(
      [
        '--process',
        '1',
        '--processes',
        '2',
        '--ckpt-mode',
        'shared',
        '--ckpt-dir',
        '/shared/r/3',
        '--stop-signal',
        'usr1',
        '--restore-wait',
        '60',
      ],
      { ADV_COORDINATOR_ADDRESS: 'h:1' },
    );
    expect('opts' in r && r.opts).toMatchObject({
      topology: { process: 1, processes: 2, coordinator: 'h:1' },
      ckptMode: 'shared',
      ckptDir: '/shared/r/3',
      stopSignal: 'SIGUSR1',
      restoreWaitSec: 60,
    });
  });
});
