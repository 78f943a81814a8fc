/**
 * The files helpers start or read by path, not by import: a wrong path there type-checks and
 * fails only when the one test that starts it runs (or, for the venv under REPO, skips it outside CI). Here
 * each is looked for at once, so a helper moved to another folder cannot break one silently.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ADV } from './helpers/backends/agent.js';
import { SLURM_INFRA, TRAIN } from './helpers/backends/kinds.js';
import { REPO } from './helpers/paths.js';
import { MULTIHOST } from './helpers/python/multihost.js';
import { S3RVER_MAIN } from './helpers/servers/s3.js';

describe('paths the helpers name', () => {
  it('REPO is the repository root', () => {
    expect(existsSync(join(REPO, 'package.json'))).toBe(true);
    expect(existsSync(join(REPO, 'requirements', 'ci.txt'))).toBe(true);
    expect(REPO).toBe(dirname(import.meta.dirname));
  });

  it('every file a helper starts or reads by path exists', () => {
    const named = {
      ADV, // built by test/global-setup.ts before the integration tests
      TRAIN,
      'slurm-start.sh': join(SLURM_INFRA, 'slurm-start.sh'),
      'slurm-stop.sh': join(SLURM_INFRA, 'slurm-stop.sh'),
      MULTIHOST,
      S3RVER_MAIN,
    };
    const missing = Object.entries(named).filter(([, path]) => !existsSync(path));
    expect(missing).toEqual([]);
  });
});
