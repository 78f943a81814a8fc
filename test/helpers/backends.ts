/** Backend and Storage YAML for tests that run on the real sshd and SLURM of this machine. */
import { existsSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { haveSshd, type Sshd } from './sshd.js';

export const TRAIN = join(import.meta.dirname, '..', '..', 'examples', 'toy-train', 'train.py');
export const SLURM_INFRA = join(import.meta.dirname, '..', 'infra');

/** A file:// object store under the controller's data dir. */
export const FILE_STORAGE =
  'apiVersion: adventuretime.dev/v1alpha1\nkind: Storage\nmetadata: {name: default}\nspec: {type: file, file: {path: store}}\n';

export const sshBackendYaml = (
  s: Sshd,
  name: string,
  root: string,
  port = s.port,
) => `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata:
  name: ${name}
spec:
  type: ssh
  connection:
    host: 127.0.0.1
    port: ${port}
    user: ${s.user}
    identityFile: ${s.identityFile}
    knownHostsFile: ${s.knownHostsFile}
  paths:
    root: ${root}
`;

/** The two-node cluster of test/infra (`debug` preemptible under `high`), through the sshd. */
export const slurmBackendYaml = (
  s: Sshd,
  root: string,
  partition: string,
  name = 'slurm-local',
) => `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata:
  name: ${name}
spec:
  type: slurm
  connection: {host: 127.0.0.1, port: ${s.port}, user: ${s.user}, identityFile: ${s.identityFile}, knownHostsFile: ${s.knownHostsFile}}
  paths: {root: ${root}}
  capabilities: {gpus: 2, nodes: 2}
  slurm:
    partitions: [{name: debug, preemptible: true}, {name: high}]
    sbatchDefaults: {partition: ${partition}}
    gresMapping: {default: gpu}
    signalGraceSec: 30
`;

/**
 * Whether the real SLURM tests can run here (root, slurm-wlm, munge, sshd). In CI they must:
 * a missing piece throws; elsewhere the test is skipped with a warning that says why.
 */
export function slurmAvailable(what: string): boolean {
  const ok = haveSshd() && existsSync('/usr/sbin/slurmctld') && userInfo().uid === 0;
  if (!ok && process.env.CI) throw new Error(`${what} needs root, slurm-wlm, munge and openssh-server in CI`);
  if (!ok) console.warn(`SKIPPING ${what}: it needs root, slurm-wlm, munge and openssh-server`);
  return ok;
}
