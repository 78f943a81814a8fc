/**
 * A Backend names its secrets (a Vast.ai API key, an agent enrollment token); the controller
 * resolves them and sends them where the spec says. Like a Run's secrets, a Backend's may not be
 * the controller's own (`ADV_*`) nor the object store's credentials: such a Backend is refused when
 * the specs load, so its adapter never exists and the key is never sent. Against the fake Vast.ai
 * API, with a valid vastai Backend beside the refused ones to show the API is being called.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import type { SourceStatusDoc } from '../controller/status/types.js';
import { startFakeVastApi, type FakeVastApi } from './helpers/cloud/fake-vast-api.js';
import { removeTree } from './helpers/io.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { passUntil } from './helpers/wait.js';

const STORE_KEY = 'STORECANARY_99';

let tmp: string;
let api: FakeVastApi;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-backend-secrets-'));
  api = await startFakeVastApi();
});
afterAll(async () => {
  await api?.stop();
  await removeTree(tmp);
});

const vast = (name: string, secret: string) => `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata: {name: ${name}}
spec:
  type: vastai
  vastai:
    apiKeySecret: ${secret}
    apiUrl: "${api.url}"
`;

describe("a Backend naming the store's credential or an ADV_* variable as its secret", () => {
  let wt: WorkTree | undefined;
  afterAll(() => wt?.cleanup());

  it('is refused when the specs load: its key is never sent, and the error says where and why', async () => {
    wt = await makeWorkTree({
      'storage.yaml': `apiVersion: adventuretime.dev/v1alpha1
kind: Storage
metadata: {name: store}
spec:
  type: s3
  s3: {bucket: ckpts, endpoint: "http://127.0.0.1:9", credentialsSecret: STORE}
`,
      'backends/good.yaml': vast('good', 'VAST_API_KEY'),
      'backends/leak.yaml': vast('leak', 'STORE_SECRET_ACCESS_KEY'),
      'backends/own.yaml': vast('own', 'ADV_GIT_TOKEN'),
    });
    const c = await Controller.create({
      repo: wt.dir,
      dataDir: join(tmp, 'data'),
      pollIntervalMs: 100,
      secrets: { env: ['VAST_API_KEY', 'STORE_SECRET_ACCESS_KEY'] },
      secretEnv: {
        ...process.env,
        VAST_API_KEY: api.apiKey,
        STORE_ACCESS_KEY_ID: 'STOREID',
        STORE_SECRET_ACCESS_KEY: STORE_KEY,
        ADV_GIT_TOKEN: 'GITTOK_CANARY_55',
      },
    });
    try {
      await c.init();
      // The valid Backend's adapter lists instances every pass: once it has, a pass has polled every
      // adapter there is; one more pass for good measure.
      await passUntil(c, 'the valid backend to call the API', () =>
        api.requests.some((r) => r.auth === 'bearer'),
      );
      await c.pass();
      expect(api.requests.filter((r) => r.auth !== 'bearer')).toEqual([]);

      const source = parse(
        await wt.git('show', 'adventuretime/status:sources/specs.yaml'),
      ) as SourceStatusDoc;
      expect(source.status.errors.map((e) => `${e.file}:${e.line} ${e.code}`)).toEqual([
        'backends/leak.yaml:7 StoreCredential',
        'backends/own.yaml:7 ReservedSecret',
      ]);
      expect(source.status.errors[0]).toMatchObject({
        message: expect.stringMatching(/"STORE_SECRET_ACCESS_KEY" is a credential of the object store/),
        fix: expect.stringMatching(/a secret of its own/),
      });
      // No secret value reached the status branch.
      expect(await wt.git('log', '-p', 'adventuretime/status')).not.toMatch(/STORECANARY|GITTOK_CANARY/);
    } finally {
      await c.stop();
    }
  });
});
