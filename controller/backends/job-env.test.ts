import { describe, expect, it } from 'vitest';
import { baseJobEnv, passedEnv } from './job-env.js';

const controllerEnv = {
  PATH: '/usr/bin:/bin',
  HOME: '/home/adv',
  LANG: 'C.UTF-8',
  LC_ALL: 'C.UTF-8',
  TMPDIR: '/tmp',
  ADV_GIT_TOKEN: 'token',
  ADV_WEBHOOK_SECRET: 'secret',
  AWS_SECRET_ACCESS_KEY: 'aws',
  SSH_AUTH_SOCK: '/run/agent',
  NODE_OPTIONS: '--inspect',
  HF_HOME: '/data/hf',
};

describe('job environment', () => {
  it('takes only the small base from the controller, never its tokens or credentials', () => {
    expect(baseJobEnv(controllerEnv)).toEqual({
      PATH: '/usr/bin:/bin',
      HOME: '/home/adv',
      LANG: 'C.UTF-8',
      LC_ALL: 'C.UTF-8',
      TMPDIR: '/tmp',
    });
  });

  it('passes what a Backend names, and says which names are not set', () => {
    expect(passedEnv(['HF_HOME', 'NOT_SET'], controllerEnv)).toEqual({
      env: { HF_HOME: '/data/hf' },
      missing: ['NOT_SET'],
    });
    expect(passedEnv(undefined, controllerEnv)).toEqual({ env: {}, missing: [] });
  });
});
