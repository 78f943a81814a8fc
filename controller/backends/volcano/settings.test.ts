import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirectorySource, formatDiagnostic, loadSpecs } from '../../index.js';

const backendYaml = (extra: string) => `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata:
  name: k8s
spec:
  type: volcano
  volcano:
    namespace: ml
    image: ghcr.io/lab/train:1
${extra}`;

describe('the volcano: block, as a user writes it', () => {
  let tmp: string;
  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-volcano-settings-'));
  });
  afterAll(() => rm(tmp, { recursive: true, force: true }));

  const diagnostics = async (yaml: string): Promise<string[]> => {
    const dir = await mkdtemp(join(tmp, 'specs-'));
    await writeFile(join(dir, 'k8s.yaml'), yaml);
    const r = await loadSpecs(new DirectorySource(dir));
    return r.diagnostics.map(formatDiagnostic);
  };

  it('accepts tolerations and a pull policy Kubernetes takes', async () => {
    const ok = backendYaml(`    imagePullPolicy: IfNotPresent
    tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
      - {key: spot, operator: Equal, value: "true", effect: NoExecute, tolerationSeconds: 30}
`);
    expect(await diagnostics(ok)).toEqual([]);
  });

  it('names every value a closed field takes, at the line, with the likely one', async () => {
    const bad = backendYaml(`    imagePullPolicy: always
    tolerations:
      - {key: nvidia.com/gpu, operator: Exist, effect: NoScedule}
`);
    const d = await diagnostics(bad);
    expect(d).toHaveLength(3);
    expect(d[0]).toMatch(
      /^k8s\.yaml:10:22: error\[SchemaEnum\] spec\.volcano\.imagePullPolicy: string "always" is not one of: Always, IfNotPresent, Never\n {4}fix: did you mean "Always"\?/,
    );
    expect(d[1]).toMatch(
      /^k8s\.yaml:12:\d+: error\[SchemaEnum\] spec\.volcano\.tolerations\[0\]\.operator: string "Exist" is not one of: Exists, Equal\n {4}fix: did you mean "Exists"\?/,
    );
    expect(d[2]).toMatch(
      /^k8s\.yaml:12:\d+: error\[SchemaEnum\] spec\.volcano\.tolerations\[0\]\.effect: string "NoScedule" is not one of: NoSchedule, PreferNoSchedule, NoExecute\n {4}fix: did you mean "NoSchedule"\?/,
    );
  });
});
