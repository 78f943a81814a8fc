import { describe, expect, it } from 'vitest';
import { isStalling } from '../../errors.js';
import type { Attempt } from '../../status/types.js';
import { setupVariables, trackingVariables } from '../../backends/job-env.js';
import type { ResolvedEnvironment } from '../../spec/environments.js';
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

/** The env without the tracking variables every job gets (tested on their own below). */
const untracked = (env: Record<string, string>) =>
  Object.fromEntries(Object.entries(env).filter(([k]) => !(k in trackingVariables('r', '', 'g'))));

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
    expect(untracked(req.env)).toEqual({ HF_HOME: '/data/hf', LR: '0.1', ADV_REDACT: 'WANDB_API_KEY' });
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
    expect(untracked(req.env)).toEqual({ ADV_REDACT: 'S_ACCESS_KEY_ID,S_SECRET_ACCESS_KEY' });
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

describe('buildJobRequest: setup composed in one place', () => {
  const cuda: ResolvedEnvironment = {
    name: 'cuda12',
    version: 2,
    digest: 'd',
    spec: {
      version: 2,
      modules: ['cuda/12.4', 'gcc/13'],
      env: { CUDA_HOME: '/opt/cuda' },
      setup: ['source /opt/lab/env.sh'],
      uv: { groups: ['train'], python: '3.12' },
      image: 'ghcr.io/lab/train:1',
    },
  };
  const inputs = {
    secrets: envSecrets({}),
    controllerEnv: {},
    passEnv: [],
    store: undefined,
    backend: {
      name: 'slurm-a',
      spec: { setup: ['export SCRATCH=/scratch/$USER'], uv: { version: '0.13.9' } },
    },
    environment: cuda,
  };

  it('orders the Backend’s steps, then the Environment’s modules, env and steps, then the run’s; uv from both', () => {
    const req = buildJobRequest('r', attempt, { command: ['x'], setup: ['make data'] }, inputs);
    expect(req.setup).toEqual([
      { from: 'Backend slurm-a', run: 'export SCRATCH=/scratch/$USER' },
      { from: 'Environment cuda12@2', run: 'module load cuda/12.4' },
      { from: 'Environment cuda12@2', run: 'module load gcc/13' },
      { from: 'Environment cuda12@2', env: { CUDA_HOME: '/opt/cuda' } },
      { from: 'Environment cuda12@2', run: 'source /opt/lab/env.sh' },
      { from: 'Run', run: 'make data' },
    ]);
    expect(req.uv).toEqual({ groups: ['train'], python: '3.12', version: '0.13.9' });
    expect(req.image).toBe('ghcr.io/lab/train:1');
    // The contract variables every backend delivers.
    expect(setupVariables(req)).toEqual({
      ADV_SETUP: JSON.stringify(req.setup),
      ADV_UV: '{"groups":["train"],"python":"3.12","version":"0.13.9"}',
    });
  });

  it('has nothing to say without a Backend step, an Environment or a run step', () => {
    const req = buildJobRequest(
      'r',
      attempt,
      { command: ['x'] },
      { ...inputs, backend: undefined, environment: undefined },
    );
    expect(setupVariables(req)).toEqual({});
  });

  it('stalls a run whose setup together exceeds what one variable may hold (E2BIG), naming the variable', () => {
    const long = 'x'.repeat(70_000);
    let err: unknown;
    try {
      buildJobRequest(
        'r',
        attempt,
        { command: ['x'], setup: [long] },
        {
          ...inputs,
          backend: { name: 'b', spec: { setup: [long] } },
        },
      );
    } catch (e) {
      err = e;
    }
    expect(isStalling(err)).toBe(true);
    expect((err as Error).message).toMatch(/^ADV_SETUP .* takes \d+ bytes; Linux refuses a variable over/);
  });
});

describe('buildJobRequest: tracking ids and retention', () => {
  const inputs = { secrets: envSecrets({}), controllerEnv, passEnv: [], store: undefined };

  it('gives every attempt of a run the same tracking id, W&B resume, and its group', () => {
    const tracking = { anchor: '2026-11-27T10:00:00.000Z', group: 'pipe' };
    const one = buildJobRequest(
      'pipe.train',
      { ...attempt, n: 1 },
      { command: 'true' },
      { ...inputs, tracking },
    );
    const two = buildJobRequest(
      'pipe.train',
      { ...attempt, n: 2 },
      { command: 'true' },
      { ...inputs, tracking },
    );
    expect(one.env.ADV_TRACKING_ID).toMatch(/^pipe-train-[0-9a-f]{8}$/);
    expect(two.env).toMatchObject({
      ADV_TRACKING_ID: one.env.ADV_TRACKING_ID,
      WANDB_RUN_ID: one.env.ADV_TRACKING_ID,
      WANDB_RESUME: 'allow',
      WANDB_NAME: 'pipe.train',
      WANDB_RUN_GROUP: 'pipe',
    });
    // Another life of the name (another first sighting) is another tracked run.
    const other = buildJobRequest(
      'pipe.train',
      attempt,
      { command: 'true' },
      {
        ...inputs,
        tracking: { anchor: '2026-11-28T10:00:00.000Z' },
      },
    );
    expect(other.env.ADV_TRACKING_ID).not.toBe(one.env.ADV_TRACKING_ID);
    expect(other.env.WANDB_RUN_GROUP).toBeUndefined();
  });

  it('lets the spec’s own WANDB_* win, never ADV_TRACKING_ID', () => {
    const req = buildJobRequest(
      'r',
      attempt,
      { command: 'true', env: { WANDB_RUN_ID: 'mine', WANDB_RESUME: 'must' } },
      inputs,
    );
    expect(req.env).toMatchObject({ WANDB_RUN_ID: 'mine', WANDB_RESUME: 'must' });
    expect(req.env.ADV_TRACKING_ID).toMatch(/^r-[0-9a-f]{8}$/);
  });

  it('keeps a long name within 64 characters of W&B’s charset', () => {
    const name = `a.${'b'.repeat(60)}`;
    const id = buildJobRequest(name, attempt, { command: 'true' }, inputs).env.ADV_TRACKING_ID!;
    expect(id.length).toBeLessThanOrEqual(64);
    expect(id).toMatch(/^[a-z0-9-]+$/);
  });

  it('passes policy.checkpoints to adv exec as ADV_RETENTION', () => {
    const checkpoints = { keepLast: 2, keepBest: { metric: 'loss', mode: 'min' as const } };
    const req = buildJobRequest('r', attempt, { command: 'true', policy: { checkpoints } }, inputs);
    expect(JSON.parse(req.env.ADV_RETENTION!)).toEqual(checkpoints);
    expect(buildJobRequest('r', attempt, { command: 'true' }, inputs).env.ADV_RETENTION).toBeUndefined();
  });
});

describe('buildJobRequest: declared outputs', () => {
  const inputs = { secrets: envSecrets({}), controllerEnv: {}, passEnv: [], store: undefined };

  it("passes a Run's outputs to adv exec as ADV_OUTPUTS, and none without them", () => {
    const req = buildJobRequest(
      'r',
      attempt,
      { command: 'true', outputs: { rollouts: {}, model: {} } },
      inputs,
    );
    expect(req.env.ADV_OUTPUTS).toBe('rollouts,model');
    expect(buildJobRequest('r', attempt, { command: 'true' }, inputs).env).not.toHaveProperty('ADV_OUTPUTS');
  });

  it("adds a DAG node's run outputs to those the node declares, each once", () => {
    const spec = {
      command: 'true',
      env: { ADV_OUTPUTS: 'params,stats' },
      outputs: { stats: {}, samples: {} },
    };
    expect(buildJobRequest('d.n', attempt, spec, inputs).env.ADV_OUTPUTS).toBe('params,stats,samples');
  });
});
