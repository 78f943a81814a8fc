import { describe, expect, it } from 'vitest';
import { isStalling } from '../errors.js';
import type { Attempt } from '../status/types.js';
import { buildJobRequest, envSecrets, missingSecretsMessage } from './job-request.js';

const attempt: Attempt = {
  n: 2,
  backend: 'b',
  jobName: 'adv-r-2',
  phase: 'Submitting',
  specCommit: 'c',
  codeCommit: 'abc',
};
const controllerEnv = {
  PATH: '/bin',
  ADV_GIT_TOKEN: 'canary-git',
  AWS_SECRET_ACCESS_KEY: 'canary-aws',
  WANDB_API_KEY: 'w-key',
  HF_HOME: '/data/hf',
};

describe('buildJobRequest: only what is named reaches a job', () => {
  it('passes spec env, resolved secrets and the Backend’s passEnv, and nothing else of the controller', () => {
    const req = buildJobRequest(
      'r',
      attempt,
      { command: ['python', 'train.py'], env: { LR: '0.1' }, secrets: ['WANDB_API_KEY'] },
      {
        secrets: envSecrets(controllerEnv),
        controllerEnv,
        passEnv: ['HF_HOME', 'NOT_SET'],
        store: undefined,
      },
    );
    // The secret travels apart from the env, and adv exec is told its name to mask its value.
    expect(req.env).toEqual({ HF_HOME: '/data/hf', LR: '0.1', ADV_REDACT: 'WANDB_API_KEY' });
    expect(req.secretEnv).toEqual({ WANDB_API_KEY: 'w-key' });
    expect(JSON.stringify(req)).not.toMatch(/canary/);
    expect(req).toMatchObject({
      jobName: 'adv-r-2',
      attempt: 2,
      argv: ['python', 'train.py'],
      code: { commit: 'abc' },
    });
  });

  it('the spec’s env wins over passEnv; a secret wins over both', () => {
    const req = buildJobRequest(
      'r',
      attempt,
      { command: 'true', env: { HF_HOME: '/spec', WANDB_API_KEY: 'from-env' }, secrets: ['WANDB_API_KEY'] },
      { secrets: envSecrets(controllerEnv), controllerEnv, passEnv: ['HF_HOME'], store: undefined },
    );
    expect(req.env).toMatchObject({ HF_HOME: '/spec' });
    expect(req.env.WANDB_API_KEY).toBeUndefined();
    expect(req.secretEnv).toEqual({ WANDB_API_KEY: 'w-key' });
  });

  it('store credentials are secrets too: out of the env, named for masking, never nameable by a spec', () => {
    const store = {
      url: 's3://b/?credentials=S',
      env: { S_ACCESS_KEY_ID: 'id', S_SECRET_ACCESS_KEY: 'k' },
      missing: [],
    };
    const req = buildJobRequest(
      'r',
      attempt,
      { command: 'true' },
      {
        secrets: envSecrets(controllerEnv),
        controllerEnv,
        passEnv: [],
        store,
      },
    );
    expect(req.store).toEqual({ url: store.url });
    expect(req.secretEnv).toEqual(store.env);
    expect(req.env).toEqual({ ADV_REDACT: 'S_ACCESS_KEY_ID,S_SECRET_ACCESS_KEY' });
    expect(() =>
      buildJobRequest(
        'r',
        attempt,
        { command: 'true', secrets: ['S_SECRET_ACCESS_KEY'] },
        {
          secrets: envSecrets({ S_SECRET_ACCESS_KEY: 'k' }),
          controllerEnv,
          passEnv: [],
          store,
        },
      ),
    ).toThrow(/S_SECRET_ACCESS_KEY is the object store's credential/);
  });

  it('a missing secret stalls the run, naming the secret and where it was looked for', () => {
    let err: unknown;
    try {
      buildJobRequest(
        'r',
        attempt,
        { command: 'true', secrets: ['WANDB_API_KEY', 'OTHER'] },
        { secrets: envSecrets({}), controllerEnv: {}, passEnv: [], store: undefined },
      );
    } catch (e) {
      err = e;
    }
    expect(isStalling(err)).toBe(true);
    expect((err as Error).message).toBe(
      "secrets WANDB_API_KEY, OTHER are not set: looked in the controller's environment",
    );
  });

  it('missing store credentials stall too', () => {
    expect(() =>
      buildJobRequest(
        'r',
        attempt,
        { command: 'true' },
        {
          secrets: envSecrets({}),
          controllerEnv: {},
          passEnv: [],
          store: { url: 's3://b/?credentials=S', env: {}, missing: ['S_ACCESS_KEY_ID'] },
        },
      ),
    ).toThrow(/store credential\(s\) S_ACCESS_KEY_ID/);
  });
});

describe('missingSecretsMessage', () => {
  it('is undefined when every secret resolves', () => {
    expect(missingSecretsMessage(envSecrets({ A: '1' }), ['A'])).toBeUndefined();
    expect(missingSecretsMessage(envSecrets({}), ['A'])).toBe(
      "secret A is not set: looked in the controller's environment",
    );
  });
});
