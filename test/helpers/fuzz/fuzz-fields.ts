/**
 * The spec fields the injection fuzz suite puts hostile strings into, each with the sink an
 * accepted value reaches (read from the code, not guessed; see the map atop
 * test/injection-fuzz.test.ts), and a spec file that holds the value on one known line.
 */
import type { SpecLoader } from '../../../controller/spec/loader.js';
import { yamlQuote } from './hostile.js';

/** One field: where it is, what an accepted value reaches, and a file with `@@` for the value. */
export interface FieldCase {
  field: string;
  sink: string;
  /** The spec file; `@@` (once, on one line) is replaced by the quoted value. */
  template: string;
  /** A value the field accepts (default `x1`); none for a field that accepts nothing. */
  ok?: string | null;
  /** false: the value reaches no process, path or remote command, so a NUL byte may be accepted. */
  nul?: false;
}

const HEAD = (kind: string, name = 'fz') =>
  `apiVersion: adventuretime.dev/v1alpha1\nkind: ${kind}\nmetadata:\n  name: ${name}\n`;
const run = (spec: string) => `${HEAD('Run')}spec:\n${spec}`;
const cmd = '  command: ["true"]\n';
const dag = (nodeA: string, nodeB = '', defaults = '') =>
  `${HEAD('DAG', 'fzd')}spec:\n${defaults}  nodes:\n    - id: a\n      outputs: {out: {}}\n      run: {command: ["true"]}\n${nodeA}` +
  `    - id: b\n      needs: [a]\n      inputs: {IN: a.outputs.out}\n      run: {command: ["true"]}\n${nodeB}`;
const backend = (type: string, extra: string, connection = '  connection: {host: 127.0.0.1}\n') =>
  `${HEAD('Backend', 'fzb')}spec:\n  type: ${type}\n${type === 'local' ? '' : connection}${extra}`;
const slurm = (block: string) => backend('slurm', `  slurm:\n${block}`);
const storage = (spec: string) => `${HEAD('Storage', 'default')}spec:\n${spec}`;

const SHELL_BY_DESIGN = 'shell code by design (not an injection target)';

/** Every field that takes a string, with its sink. */
export const FIELDS: FieldCase[] = [
  {
    field: 'Run metadata.name',
    ok: 'r1',
    sink: 'status file name, job name adv-<run>-<n>, --job-name, job dir, store keys runs/<run>/',
    template: `${HEAD('Run', '@@')}spec:\n${cmd}`,
  },
  {
    field: 'Run metadata.labels{key}',
    sink: 'status file (YAML), `adv get -l`',
    template: run(cmd).replace('  name: fz\n', '  name: fz\n  labels: {@@: "x"}\n'),
  },
  {
    field: 'Run metadata.labels{value}',
    nul: false,
    sink: 'status file (YAML), `adv get -l`; no shell, path or remote sink',
    template: run(cmd).replace('  name: fz\n', '  name: fz\n  labels: {k: @@}\n'),
  },
  {
    field: 'Run spec.command[i] (list)',
    sink: 'argv: run.sh `node adv-exec -- <shellJoin(argv)>` (ssh, slurm), spawn argv (local), then execve',
    template: run('  command: ["python3", @@]\n'),
  },
  {
    field: 'Run spec.command (string)',
    ok: 'true',
    sink: `\`sh -c <command>\`: ${SHELL_BY_DESIGN}`,
    template: run('  command: @@\n'),
  },
  {
    field: 'Run spec.entry',
    ok: 'a.py:f',
    sink: 'argv of `python3 -c <fixed program> <file> <func>`',
    template: run('  entry: @@\n'),
  },
  {
    field: 'Run spec.workingDir',
    sink: 'env ADV_WORKDIR (quoted) → `cd "$ADV_WORKDIR"` in run.sh; join(work, dir) on local',
    template: run(`${cmd}  workingDir: @@\n`),
  },
  {
    field: 'Run spec.env{name}',
    sink: 'env file `export NAME=...` (name unquoted), spawn env',
    template: run(`${cmd}  env: {@@: "x"}\n`),
  },
  {
    field: 'Run spec.env{value}',
    sink: 'env file `export NAME=<shellQuote(value)>` (ssh, slurm), spawn env (local)',
    template: run(`${cmd}  env: {FZ: @@}\n`),
  },
  {
    field: 'Run spec.secrets[i]',
    sink: 'env name of the resolved secret (env file, spawn env)',
    template: run(`${cmd}  secrets: [@@]\n`),
  },
  {
    field: 'Run spec.setup[i]',
    sink: `env ADV_SETUP_<i> → \`sh -c "$ADV_SETUP_<i>"\`: ${SHELL_BY_DESIGN}`,
    template: run(`${cmd}  setup: [@@]\n`),
  },
  {
    field: 'Run spec.code.ref',
    sink: 'controller: `git rev-parse --verify --quiet <ref>^{commit}` (argv)',
    template: run(`${cmd}  code: {ref: @@}\n`),
  },
  {
    field: 'Run spec.code.path',
    sink: 'controller: git tree walk by segment; `git archive <commit>:<path>` (argv, local)',
    template: run(`${cmd}  code: {path: @@}\n`),
  },
  {
    field: 'Run spec.code.repo',
    ok: 'https://git.example.com/lab/mono.git',
    sink: 'controller: `git fetch -- <URL as new URL() writes it>` (argv; https/http only, GIT_ALLOW_PROTOCOL=http:https)',
    template: run(`${cmd}  code: {repo: @@}\n`),
  },
  {
    field: 'Run spec.code.tokenSecret',
    sink: 'controller: a secret name looked up (never a path, argument or variable)',
    template: run(`${cmd}  code: {repo: "https://git.example.com/m.git", tokenSecret: @@}\n`),
  },
  {
    field: 'Run spec.resources.gpuType',
    sink: 'solver; lookup key of slurm gresMapping (never pasted)',
    template: run(`${cmd}  resources: {gpus: 1, gpuType: @@}\n`),
  },
  {
    field: 'Run spec.resources.tpuType',
    nul: false,
    sink: 'none in this build (the gcp-tpu adapter takes acceleratorType from the Backend)',
    template: run(`${cmd}  resources: {tpus: 1, tpuType: @@}\n`),
  },
  {
    field: 'Run spec.resources.memory',
    ok: '1Gi',
    sink: '#SBATCH --mem=<slurmMem(memory)>',
    template: run(`${cmd}  resources: {memory: @@}\n`),
  },
  {
    field: 'Run spec.parallelism.tp.rules[i].param',
    nul: false,
    sink: 'env ADV_PARALLELISM (JSON, quoted in the env file)',
    template: run(
      `${cmd}  resources: {gpus: 2}\n  parallelism: {mesh: {axes: [m], shape: [2]}, tp: {axis: m, rules: [{param: @@, spec: [m]}]}}\n`,
    ),
  },
  {
    field: 'Run spec.parallelism.mesh.axes[i]',
    ok: 'm',
    sink: 'env ADV_PARALLELISM (JSON)',
    template: run(`${cmd}  resources: {gpus: 2}\n  parallelism: {mesh: {axes: [@@], shape: [2]}}\n`),
  },
  {
    field: 'Run spec.backendSelector.order[i]',
    ok: null,
    sink: 'solver; backend name lookup',
    template: run(`${cmd}  backendSelector: {order: [@@]}\n`),
  },
  {
    field: 'Run spec.backendSelector.constraints.clusters[i]',
    nul: false,
    sink: 'solver comparison only',
    template: run(`${cmd}  backendSelector: {constraints: {clusters: [@@]}}\n`),
  },
  {
    field: 'DAG spec.nodes[i].id',
    ok: 'c',
    sink: 'child run name <dag>.<id> (then as Run metadata.name)',
    template: dag('').replace('- id: b\n', '- id: @@\n'),
  },
  {
    field: 'DAG spec.nodes[i].outputs{name}',
    sink: 'env ADV_OUTPUTS; store key runs/<run>/outputs/<name>/; $ADV_ARTIFACT_DIR/<name>',
    template: dag('').replace('outputs: {out: {}}', 'outputs: {out: {}, @@: {}}'),
  },
  {
    field: 'DAG spec.nodes[i].inputs{name}',
    sink: 'env ADV_INPUT_<name>, ADV_INPUT_<name>_DIR; <job>/inputs/<name>',
    template: dag('').replace('inputs: {IN: a.outputs.out}', 'inputs: {@@: a.outputs.out}'),
  },
  {
    field: 'DAG spec.nodes[i].inputs{value}',
    ok: 'a.outputs.out',
    sink: 'ADV_INPUTS JSON (run, output) → store keys',
    template: dag('').replace('inputs: {IN: a.outputs.out}', 'inputs: {IN: @@}'),
  },
  {
    field: 'DAG spec.nodes[i].needs[j]',
    ok: null,
    sink: 'planner only',
    template: dag('').replace('needs: [a]', 'needs: [a, @@]'),
  },
  {
    field: 'DAG spec.defaults.env{name}',
    sink: 'like Run spec.env{name}, for every node',
    template: dag('', '', '  defaults: {env: {@@: "x"}}\n'),
  },
  {
    field: 'DAG spec.defaults.env{value}',
    sink: 'like Run spec.env{value}, for every node',
    template: dag('', '', '  defaults: {env: {FZ: @@}}\n'),
  },
  {
    field: 'DAG spec.nodes[i].run.env{value}',
    sink: 'like Run spec.env{value}',
    template: dag('').replace(
      '- id: a\n      outputs: {out: {}}\n      run: {command: ["true"]}',
      '- id: a\n      outputs: {out: {}}\n      run: {command: ["true"], env: {FZ: @@}}',
    ),
  },
  {
    field: 'Backend metadata.name',
    ok: 'b1',
    sink: 'status file name, solver',
    template: backend('ssh', '').replace('  name: fzb\n', '  name: @@\n'),
  },
  {
    field: 'Backend spec.connection.host',
    sink: 'controller: `ssh -G ... <host>` (argv), ssh2 connect',
    template: backend('ssh', '', '  connection: {host: @@}\n'),
  },
  {
    field: 'Backend spec.connection.user',
    sink: 'controller: `ssh -G -l <user>` (argv), ssh2 login',
    template: backend('ssh', '', '  connection: {host: h, user: @@}\n'),
  },
  {
    field: 'Backend spec.connection.identityFile',
    sink: 'controller: file read (admin path; absolute or under ~)',
    ok: '~/.ssh/id',
    template: backend('ssh', '', '  connection: {host: h, identityFile: @@}\n'),
  },
  {
    field: 'Backend spec.connection.knownHostsFile',
    sink: 'controller: file read/append (admin path; absolute or under ~)',
    ok: '/etc/ssh/known',
    template: backend('ssh', '', '  connection: {host: h, knownHostsFile: @@}\n'),
  },
  {
    field: 'Backend spec.connection.proxyJump',
    sink: 'controller: parsed by regex; jump host → `ssh -G <host>` (argv)',
    template: backend('ssh', '', '  connection: {host: h, proxyJump: @@}\n'),
  },
  {
    field: 'Backend(ssh) spec.paths.root',
    sink: 'remote: quoted args of sh -c scripts; env file (quoted)',
    template: backend('ssh', '  paths: {root: @@}\n'),
  },
  {
    field: 'Backend(ssh) spec.paths.work',
    sink: 'remote: job dir, quoted args; env ADV_JOB_DIR (quoted)',
    template: backend('ssh', '  paths: {work: @@}\n'),
  },
  {
    field: 'Backend(slurm) spec.paths.root',
    sink: 'remote: quoted args; `#SBATCH --output=<work>/<job>/slurm-%j.out` (unquoted line)',
    template: backend('slurm', '  paths: {root: @@}\n'),
  },
  {
    field: 'Backend(slurm) spec.paths.work',
    sink: '`#SBATCH --output=<work>/<job>/slurm-%j.out` (unquoted line); `cd <shellQuote(dir)>`',
    template: backend('slurm', '  paths: {work: @@}\n'),
  },
  {
    field: 'Backend spec.paths.log',
    sink: 'none in this build (no adapter reads it)',
    template: backend('ssh', '  paths: {log: @@}\n'),
  },
  {
    field: 'Backend spec.setup[i]',
    sink: `env ADV_SETUP_<i> → \`sh -c\`: ${SHELL_BY_DESIGN}`,
    template: backend('ssh', '  setup: [@@]\n'),
  },
  {
    field: 'Backend spec.passEnv[i]',
    sink: 'env name read from the controller, written to the env file',
    template: backend('ssh', '  passEnv: [@@]\n'),
  },
  {
    field: 'Backend spec.cluster',
    sink: 'solver comparison only',
    template: backend('ssh', '  cluster: @@\n'),
  },
  {
    field: 'Backend spec.capabilities.gpuTypes[i]',
    sink: 'solver comparison only',
    template: backend('ssh', '  capabilities: {gpuTypes: [@@]}\n'),
  },
  {
    field: 'Backend spec.slurm.partitions[i].name',
    sink: 'capacity filter (sinfo output comparison)',
    template: slurm('    partitions: [{name: @@}]\n'),
  },
  {
    field: 'Backend spec.slurm.partitions[i].gpuType',
    sink: 'solver comparison only',
    template: slurm('    partitions: [{name: p, gpuType: @@}]\n'),
  },
  {
    field: 'Backend spec.slurm.partitions[i].maxTime',
    sink: 'none in this build',
    template: slurm('    partitions: [{name: p, maxTime: @@}]\n'),
  },
  ...['partition', 'account', 'qos', 'time', 'mem', 'exclude', 'constraint'].map((k) => ({
    field: `Backend spec.slurm.sbatchDefaults.${k}`,
    sink: `#SBATCH --${k}=<value> (unquoted line of the batch script)`,
    template: slurm(`    sbatchDefaults: {${k}: @@}\n`),
    ok: ({ time: '1:00', mem: '1G' } as Record<string, string>)[k],
  })),
  {
    field: 'Backend spec.slurm.sbatchDefaults.extra[i]',
    ok: '--comment=x',
    sink: '#SBATCH <value> (admin-chosen sbatch flags by design; one line)',
    template: slurm('    sbatchDefaults: {extra: [@@]}\n'),
  },
  {
    field: 'Backend spec.slurm.gresMapping{key}',
    ok: 'H100',
    sink: 'lookup key',
    template: slurm('    gresMapping: {@@: gpu}\n'),
  },
  {
    field: 'Backend spec.slurm.gresMapping{value}',
    sink: '#SBATCH --gres=<value>:<n>',
    template: slurm('    gresMapping: {default: @@}\n'),
  },
  {
    field: 'Backend spec.local.workDir',
    sink: 'controller: job dirs (path.join; admin path)',
    template: backend('local', '  local: {workDir: @@}\n'),
  },
  {
    field: 'Backend(gcp-tpu) spec.gcpTpu.project',
    ok: 'adv-proj',
    sink: 'gcloud argv `--project=<value>` (one argument, never a shell)',
    template: backend('gcp-tpu', '  gcpTpu: {zone: us-central2-b, acceleratorType: v4-8, project: @@}\n', ''),
  },
  {
    field: 'Backend(gcp-tpu) spec.gcpTpu.zone',
    ok: 'us-central2-b',
    sink: 'gcloud argv `--zone=<value>` (one argument, never a shell)',
    template: backend('gcp-tpu', '  gcpTpu: {project: adv-proj, acceleratorType: v4-8, zone: @@}\n', ''),
  },
  {
    field: 'Backend(gcp-tpu) spec.gcpTpu.acceleratorType',
    ok: 'v4-8',
    sink: 'gcloud argv `--accelerator-type=<value>` (one argument, never a shell)',
    template: backend(
      'gcp-tpu',
      '  gcpTpu: {project: adv-proj, zone: us-central2-b, acceleratorType: @@}\n',
      '',
    ),
  },
  {
    field: 'Backend(gcp-tpu) spec.gcpTpu.runtimeVersion',
    ok: 'tpu-ubuntu2204-base',
    sink: 'gcloud argv `--version=<value>` (one argument, never a shell)',
    template: backend(
      'gcp-tpu',
      '  gcpTpu: {project: adv-proj, zone: us-central2-b, acceleratorType: v4-8, runtimeVersion: @@}\n',
      '',
    ),
  },
  {
    field: 'Storage spec.file.path',
    sink: 'controller path; file:// URL → env ADV_STORE (quoted), `--store "$ADV_STORE"`',
    template: storage('  type: file\n  file: {path: @@}\n'),
  },
  {
    field: 'Storage spec.s3.prefix',
    sink: 'store keys; s3:// URL → env ADV_STORE (quoted)',
    template: storage('  type: s3\n  s3: {bucket: bkt, prefix: @@}\n'),
  },
  {
    field: 'Storage spec.s3.endpoint',
    ok: 'http://x',
    sink: 'S3 client endpoint; URL query → env ADV_STORE (quoted)',
    template: storage('  type: s3\n  s3: {bucket: bkt, endpoint: @@}\n'),
  },
];

/** How the loader answered one value in one field. */
export type Verdict =
  { accepted: true } | { accepted: false; located: boolean; codes: string[]; where: string };

/**
 * Loads `template` with `value` in it through the real loader (parse → schema → rules, the
 * cross-file rules of a one-file repo) and says whether the object is accepted; a refusal is
 * `located` when every error names this file and the value's line.
 */
export function verdict(loader: SpecLoader, c: FieldCase, value: string, n: number): Verdict {
  const lines = c.template.split('\n');
  const at = lines.findIndex((l) => l.includes('@@'));
  const file = `fuzz/${n}.yaml`;
  const text = c.template.replace('@@', () => yamlQuote(value));
  loader.loadFile(file, Buffer.from(text), String(n));
  const errors = loader.result().diagnostics.filter((d) => d.severity === 'error');
  loader.removeFile(file);
  if (!errors.length) return { accepted: true };
  const located = errors.every((e) => e.file === file && e.line === at + 1);
  const where = errors.map((e) => `${e.file}:${e.line}:${e.column} ${e.code}`).join('; ');
  return { accepted: false, located, codes: [...new Set(errors.map((e) => e.code))], where };
}
