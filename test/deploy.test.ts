/**
 * The deploy/ folder (docs/deploy.md): every YAML parses, the Kubernetes objects agree with each
 * other and with the image, the systemd unit and the Containerfile name what the build makes and
 * flags the CLI has, the worker install script does what it says on this machine, and the GitHub
 * workflow's plan step and comment script work against a real specs repo and a fake GitHub.
 * Nothing here builds an image, talks to a cluster or to GitHub.
 */
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join, posix, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { runCli } from '../cli/program.js';
import { captureIo } from './helpers/io.js';

const root = join(import.meta.dirname, '..');
const deploy = join(root, 'deploy');
const read = (rel: string) => readFileSync(join(root, rel), 'utf8');

/* eslint-disable @typescript-eslint/no-explicit-any -- parsed YAML is checked field by field */
type Obj = Record<string, any>;

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)],
  );
}

function parseYaml(file: string): Obj[] {
  const docs = parseAllDocuments(readFileSync(file, 'utf8'));
  for (const d of docs)
    if (d.errors.length) throw new Error(`${relative(root, file)}: ${d.errors.map(String).join('; ')}`);
  return docs.map((d) => d.toJS() as Obj).filter((o) => o !== null);
}

function onPath(cmd: string): string | undefined {
  const r = spawnSync('sh', ['-c', `command -v "$1"`, 'sh', cmd], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

/** The `--flags` in an argv. */
const flagsOf = (argv: readonly string[]) =>
  argv.filter((a) => /^--[a-z]/.test(a)).map((a) => a.split('=')[0]!);
/** The value after `flag` in an argv. */
const argAfter = (argv: readonly string[], flag: string) => argv[argv.indexOf(flag) + 1];

async function helpOf(command: string): Promise<string> {
  const io = captureIo({}, root);
  expect(await runCli([command, '--help'], io)).toBe(0);
  return io.out();
}

// ---------------------------------------------------------------------------------------------
// Containerfile: a small parser for the instructions this file uses.

interface Instr {
  cmd: string;
  args: string;
}
interface Stage {
  name?: string;
  image: string;
  instrs: Instr[];
}

function parseContainerfile(text: string): Stage[] {
  const instrs: Instr[] = [];
  let cur = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!cur && (line === '' || line.startsWith('#'))) continue;
    if (cur && line.startsWith('#')) continue; // comment lines inside a continuation are dropped
    if (line.endsWith('\\')) {
      cur += line.slice(0, -1) + ' ';
      continue;
    }
    cur += line;
    const m = /^(\S+)\s*(.*)$/s.exec(cur)!;
    instrs.push({ cmd: m[1]!.toUpperCase(), args: m[2]!.trim() });
    cur = '';
  }
  const stages: Stage[] = [];
  for (const i of instrs) {
    if (i.cmd === 'FROM') {
      const [image, as, name] = i.args.split(/\s+/);
      stages.push({ image: image!, ...(as?.toUpperCase() === 'AS' ? { name } : {}), instrs: [] });
    } else if (stages.length) stages.at(-1)!.instrs.push(i);
  }
  return stages;
}

interface Copy {
  from?: string;
  sources: string[];
  dest: string;
  workdir: string;
}

function copiesOf(stage: Stage): Copy[] {
  let workdir = '/';
  const out: Copy[] = [];
  for (const i of stage.instrs) {
    if (i.cmd === 'WORKDIR') workdir = posix.resolve(workdir, i.args);
    if (i.cmd !== 'COPY') continue;
    const words = i.args.startsWith('[') ? (JSON.parse(i.args) as string[]) : i.args.split(/\s+/);
    const flags = words.filter((w) => w.startsWith('--'));
    const paths = words.filter((w) => !w.startsWith('--'));
    const from = flags.find((f) => f.startsWith('--from='))?.slice('--from='.length);
    out.push({ ...(from ? { from } : {}), sources: paths.slice(0, -1), dest: paths.at(-1)!, workdir });
  }
  return out;
}

/** Absolute paths a COPY puts into its stage. */
const copiedPaths = (c: Copy) =>
  c.sources.map((s) =>
    c.dest.endsWith('/') || c.sources.length > 1
      ? posix.join(posix.resolve(c.workdir, c.dest), posix.basename(s))
      : posix.resolve(c.workdir, c.dest),
  );

const json = (stage: Stage, cmd: string) =>
  JSON.parse(stage.instrs.find((i) => i.cmd === cmd)!.args) as string[];

const containerfile = parseContainerfile(read('deploy/container/Containerfile'));
const finalStage = containerfile.at(-1)!;
const imageUid = finalStage.instrs.find((i) => i.cmd === 'USER')!.args.split(':')[0]!;

describe('deploy/container/Containerfile', () => {
  it('builds in a stage with dev dependencies and runs on node:20-bookworm-slim as non-root', () => {
    expect(containerfile.length).toBeGreaterThanOrEqual(2);
    const build = containerfile[0]!;
    expect(build.name).toBe('build');
    const buildRuns = build.instrs.filter((i) => i.cmd === 'RUN').map((i) => i.args);
    expect(buildRuns.join('\n')).toMatch(/npm ci\b/);
    expect(buildRuns.join('\n')).toMatch(/npm run build\b/);
    expect(buildRuns.join('\n')).toMatch(/npm prune --omit=dev/);

    expect(finalStage.image).toBe('node:20-bookworm-slim');
    const apt = finalStage.instrs.find((i) => i.cmd === 'RUN' && i.args.includes('apt-get install'))!.args;
    for (const pkg of ['git', 'openssh-client', 'ca-certificates']) expect(apt.split(/\s+/)).toContain(pkg);
    expect(imageUid).toMatch(/^[1-9]\d*$/); // a uid, not root/0
    expect(finalStage.instrs.find((i) => i.cmd === 'EXPOSE')!.args.split(/\s+/)).toContain('8080');
  });

  it('copies only paths that exist in the repo or that the build stage made', () => {
    const stages = new Map(containerfile.filter((s) => s.name).map((s) => [s.name!, s]));
    for (const stage of containerfile) {
      for (const c of copiesOf(stage)) {
        if (!c.from) {
          for (const s of c.sources) expect(existsSync(join(root, s)), `COPY ${s}`).toBe(true);
          continue;
        }
        const src = stages.get(c.from);
        expect(src, `--from=${c.from}`).toBeDefined();
        const runs = src!.instrs.filter((i) => i.cmd === 'RUN').map((i) => i.args);
        const made = new Set(copiesOf(src!).flatMap(copiedPaths));
        const workdir = copiesOf(src!)[0]?.workdir ?? '/';
        if (runs.some((r) => /npm run build\b/.test(r))) made.add(posix.join(workdir, 'dist'));
        if (runs.some((r) => /npm ci\b/.test(r))) made.add(posix.join(workdir, 'node_modules'));
        for (const s of c.sources) expect([...made], `COPY --from=${c.from} ${s}`).toContain(s);
      }
    }
    // The build stage has everything `npm run build` compiles.
    const buildCopies = new Set(copiesOf(containerfile[0]!).flatMap((c) => c.sources));
    const tsconfig = JSON.parse(read('tsconfig.build.json')) as { include: string[]; extends?: string };
    for (const dir of tsconfig.include)
      expect(buildCopies, `tsconfig.build.json includes ${dir}`).toContain(dir);
    for (const f of ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'runtime'])
      expect(buildCopies).toContain(f);
  });

  it('puts what the CLI reads at run time beside it, and starts the controller', () => {
    const entry = json(finalStage, 'ENTRYPOINT');
    expect(entry).toEqual(['node', '/opt/adventuretime/dist/cli/adv.js']);
    const app = posix.dirname(posix.dirname(posix.dirname(entry[1]!)));
    const present = copiesOf(finalStage).flatMap(copiedPaths);
    // package.json (runtime/version.ts), specs/ (cli/templates.ts), the build and prod deps.
    for (const p of ['package.json', 'node_modules', 'dist', 'specs'])
      expect(present).toContain(posix.join(app, p));

    const cmd = json(finalStage, 'CMD');
    expect(cmd[0]).toBe('controller');
    expect(argAfter(cmd, '--http')).toBe('0.0.0.0:8080');
    const volumes = JSON.parse(finalStage.instrs.find((i) => i.cmd === 'VOLUME')!.args) as string[];
    expect(volumes).toContain(argAfter(cmd, '--data-dir'));

    const health = finalStage.instrs.find((i) => i.cmd === 'HEALTHCHECK')!.args;
    expect(health).toContain("fetch('http://127.0.0.1:8080/healthz')");
  });

  it('has a HEALTHCHECK command (node -e with fetch) that passes on 200 and fails otherwise', async () => {
    const hc = finalStage.instrs.find((i) => i.cmd === 'HEALTHCHECK')!.args;
    const argv = JSON.parse(hc.slice(hc.indexOf('CMD') + 3).trim()) as string[];
    expect(argv.slice(0, 2)).toEqual(['node', '-e']);
    let status = 200;
    const server = createServer((req, res) => {
      res.writeHead(req.url === '/healthz' ? status : 404).end();
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    const port = (server.address() as AddressInfo).port;
    const probe = async () =>
      new Promise<number | null>((res) =>
        execFile(process.execPath, ['-e', argv[2]!.replace('127.0.0.1:8080', `127.0.0.1:${port}`)], {
          timeout: 60_000, // a hang guard: a node start-up on a loaded machine takes seconds
        }).on('exit', (code) => res(code)),
      );
    try {
      expect(await probe()).toBe(0);
      status = 503;
      expect(await probe()).toBe(1);
    } finally {
      await new Promise((res) => server.close(res));
    }
    expect(await probe()).toBe(1); // nothing listening
  });
});

// ---------------------------------------------------------------------------------------------

describe('every YAML file under deploy/', () => {
  it('parses', () => {
    const files = filesUnder(deploy).filter((f) => /\.ya?ml$/.test(f));
    expect(files.length).toBeGreaterThanOrEqual(8);
    for (const f of files) expect(parseYaml(f).length, relative(root, f)).toBeGreaterThan(0);
  });
});

describe('deploy/kubernetes', () => {
  const dir = join(deploy, 'kubernetes');
  const kustomization = parseYaml(join(dir, 'kustomization.yaml'))[0]!;
  const manifests = readdirSync(dir).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml');
  const objects = manifests.flatMap((f) => parseYaml(join(dir, f)).map((o) => ({ file: f, o })));
  const one = (kind: string) => {
    const found = objects.filter((x) => x.o.kind === kind);
    expect(found.length, kind).toBe(1);
    return found[0]!.o;
  };
  const named = (kind: string, name: string) =>
    objects.find((x) => x.o.kind === kind && x.o.metadata?.name === name)?.o;
  const deployment = one('Deployment');
  const service = one('Service');
  const pod = deployment.spec.template.spec;
  const container = pod.containers[0];
  const args = container.args as string[];

  it('kustomization.yaml lists every manifest file, and they all exist', () => {
    expect([...kustomization.resources].sort()).toEqual([...manifests].sort());
    expect(manifests.sort()).toEqual(
      [
        'namespace.yaml',
        'serviceaccount.yaml',
        'secret.example.yaml',
        'infra.yaml',
        'pvc.yaml',
        'deployment.yaml',
        'service.yaml',
      ].sort(),
    );
    expect(kustomization.images.map((i: Obj) => i.name)).toContain(container.image);
  });

  it('puts every object in the one namespace', () => {
    const ns = one('Namespace').metadata.name;
    expect(kustomization.namespace).toBe(ns);
    for (const { file, o } of objects)
      if (o.kind !== 'Namespace') expect(o.metadata.namespace, `${file} ${o.kind}`).toBe(ns);
  });

  it('runs one controller, replaced not rolled', () => {
    expect(deployment.spec.replicas).toBe(1);
    expect(deployment.spec.strategy.type).toBe('Recreate');
    expect(pod.containers).toHaveLength(1);
    expect(args[0]).toBe('controller');
  });

  it('selects its own pods: Deployment selector, template labels and Service selector agree', () => {
    const labels = deployment.spec.template.metadata.labels as Obj;
    const match = deployment.spec.selector.matchLabels as Obj;
    expect(Object.keys(match).length).toBeGreaterThan(0);
    for (const [k, v] of Object.entries(match)) expect(labels[k], k).toBe(v);
    const sel = service.spec.selector as Obj;
    expect(Object.keys(sel).length).toBeGreaterThan(0);
    for (const [k, v] of Object.entries(sel)) expect(labels[k], k).toBe(v);
  });

  it('references only the ServiceAccount, PVC and Secrets that the other manifests define', () => {
    expect(named('ServiceAccount', pod.serviceAccountName)).toBeDefined();
    const volumes = pod.volumes as Obj[];
    const claims = volumes
      .filter((v) => v.persistentVolumeClaim)
      .map((v) => v.persistentVolumeClaim.claimName);
    expect(claims.length).toBeGreaterThan(0);
    for (const c of claims) expect(named('PersistentVolumeClaim', c), c).toBeDefined();
    const secrets = [
      ...volumes.filter((v) => v.secret).map((v) => v.secret.secretName),
      ...(container.envFrom ?? []).filter((e: Obj) => e.secretRef).map((e: Obj) => e.secretRef.name),
    ];
    expect(secrets.length).toBeGreaterThanOrEqual(2);
    for (const s of secrets) expect(named('Secret', s), s).toBeDefined();
    for (const e of container.env ?? []) {
      const ref = e.valueFrom?.secretKeyRef;
      if (ref) expect(Object.keys({ ...named('Secret', ref.name)?.stringData })).toContain(ref.key);
    }
    const volumeNames = new Set(volumes.map((v) => v.name));
    for (const m of container.volumeMounts) expect(volumeNames, m.name).toContain(m.name);
    // The data dir is on the PVC.
    const dataVolume = volumes.find((v) => v.persistentVolumeClaim)!.name;
    const mount = container.volumeMounts.find((m: Obj) => m.name === dataVolume);
    expect(argAfter(args, '--data-dir')).toBe(mount.mountPath);
    // The env Secret carries what the controller reads.
    const env = named('Secret', container.envFrom[0].secretRef.name)!;
    expect(Object.keys(env.stringData)).toEqual(
      expect.arrayContaining(['ADV_GIT_TOKEN', 'ADV_WEBHOOK_SECRET']),
    );
  });

  it('takes Backends and Storage from the infra ConfigMap, whose entries are valid specs of those kinds', async () => {
    const infraDir = argAfter(args, '--infra-dir')!;
    const mount = container.volumeMounts.find((m: Obj) => m.mountPath === infraDir);
    expect(mount?.readOnly).toBe(true);
    const volume = (pod.volumes as Obj[]).find((v) => v.name === mount.name)!;
    const configMap = named('ConfigMap', volume.configMap.name)!;
    const files = await mkdtemp(join(tmpdir(), 'adv-infra-cm-'));
    try {
      for (const [name, text] of Object.entries(configMap.data as Record<string, string>))
        await writeFile(join(files, name), text);
      const io = captureIo({}, root);
      expect(await runCli(['validate', files, '-o', 'json'], io), io.out()).toBe(0);
      const kinds = parseAllDocuments(
        Object.values(configMap.data as Record<string, string>).join('\n---\n'),
      ).map((d) => (d.toJS() as Obj).kind as string);
      expect(new Set(kinds)).toEqual(new Set(['Backend', 'Storage']));
    } finally {
      await rm(files, { recursive: true, force: true });
    }
  });

  it('listens where the Service, the probes and the scrape annotations look', () => {
    const httpPort = Number(argAfter(args, '--http')!.split(':').at(-1));
    const portOf = (p: number | string) =>
      typeof p === 'number' ? p : container.ports.find((x: Obj) => x.name === p)?.containerPort;
    expect(container.ports.map((p: Obj) => p.containerPort)).toContain(httpPort);
    expect(argAfter(args, '--http')!.startsWith('0.0.0.0:')).toBe(true);
    expect(service.spec.ports).toHaveLength(1);
    expect(portOf(service.spec.ports[0].targetPort)).toBe(httpPort);
    for (const probe of ['livenessProbe', 'readinessProbe', 'startupProbe']) {
      expect(container[probe].httpGet.path, probe).toBe('/healthz');
      expect(portOf(container[probe].httpGet.port), probe).toBe(httpPort);
    }
    const ann = deployment.spec.template.metadata.annotations;
    expect(ann['prometheus.io/scrape']).toBe('true');
    expect(ann['prometheus.io/path']).toBe('/metrics');
    expect(Number(ann['prometheus.io/port'])).toBe(httpPort);
  });

  it('runs as the image user, without privileges', () => {
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    expect(String(pod.securityContext.runAsUser)).toBe(imageUid);
    expect(container.securityContext.allowPrivilegeEscalation).toBe(false);
    expect(container.securityContext.capabilities.drop).toContain('ALL');
    // The image's HOME: where ~/.ssh of the Backend specs is mounted.
    const home = container.env.find((e: Obj) => e.name === 'HOME').value;
    expect(container.volumeMounts.map((m: Obj) => m.mountPath)).toContain(`${home}/.ssh`);
    expect(read('deploy/container/Containerfile')).toContain(`HOME=${home}`);
  });

  it('uses only flags that `adv controller` has', async () => {
    const help = await helpOf('controller');
    for (const f of flagsOf(args)) expect(help, f).toContain(f);
  });

  if (!onPath('kubectl'))
    console.warn(
      'SKIPPING the kubectl kustomize render: kubectl is not installed (the YAML consistency checks above still ran)',
    );
  it.skipIf(!onPath('kubectl'))('renders with kubectl kustomize (offline)', () => {
    const out = execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8' });
    const docs = parseAllDocuments(out).map((d) => d.toJS() as Obj);
    expect(docs).toHaveLength(objects.length);
    const rendered = docs.find((d) => d.kind === 'Deployment')!;
    const image = kustomization.images[0];
    expect(rendered.spec.template.spec.containers[0].image).toBe(`${image.newName}:${image.newTag}`);
    for (const d of docs)
      if (d.kind !== 'Namespace') expect(d.metadata.namespace).toBe(kustomization.namespace);
  });
});

// ---------------------------------------------------------------------------------------------

function parseUnit(text: string): Map<string, [string, string][]> {
  const sections = new Map<string, [string, string][]>();
  let section = '';
  for (const raw of text.replace(/\\\n/g, ' ').split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#') || line.startsWith(';')) continue;
    const s = /^\[(.+)\]$/.exec(line);
    if (s) {
      section = s[1]!;
      sections.set(section, []);
      continue;
    }
    const i = line.indexOf('=');
    expect(i, `not key=value: ${line}`).toBeGreaterThan(0);
    sections.get(section)!.push([line.slice(0, i).trim(), line.slice(i + 1).trim()]);
  }
  return sections;
}

describe('deploy/systemd', () => {
  const unitFile = join(deploy, 'systemd', 'adventuretime-controller.service');
  const unit = parseUnit(readFileSync(unitFile, 'utf8'));
  const service = unit.get('Service') ?? [];
  const get = (k: string) => service.filter(([key]) => key === k).map(([, v]) => v);
  const execStart = get('ExecStart')[0] ?? '';
  const argv = execStart.split(/\s+/);

  it('has [Unit], [Service] and [Install], and starts `adv controller` from the build', () => {
    expect([...unit.keys()]).toEqual(['Unit', 'Service', 'Install']);
    expect(get('ExecStart')).toHaveLength(1);
    expect(execStart).toMatch(/^\/usr\/bin\/node \/opt\/adventuretime\/dist\/cli\/adv\.js controller /);
    expect(unit.get('Install')!.find(([k]) => k === 'WantedBy')?.[1]).toBe('multi-user.target');
  });

  it('runs as a dedicated user, restarts on failure, stops on SIGTERM, and is sandboxed', () => {
    const user = get('User')[0];
    expect(user).toBeDefined();
    expect(['root', '0']).not.toContain(user);
    expect(get('EnvironmentFile')).toHaveLength(1);
    expect(get('Restart')).toEqual(['on-failure']);
    expect(get('KillSignal')).toEqual(['SIGTERM']);
    expect(get('TimeoutStopSec')).toHaveLength(1);
    expect(get('NoNewPrivileges')).toEqual(['yes']);
    expect(get('ProtectSystem')).toEqual(['strict']);
    expect(get('PrivateTmp')).toEqual(['yes']);
    // The data dir is writable under ProtectSystem=strict.
    const dataDir = argAfter(argv, '--data-dir')!;
    const writable = get('ReadWritePaths').flatMap((v) => v.split(/\s+/));
    expect(writable.some((p) => dataDir === p || dataDir.startsWith(p.replace(/\/?$/, '/')))).toBe(true);
  });

  it('gets every variable it expands from itself or the example env file', () => {
    const envExample = read('deploy/systemd/adventuretime.env.example');
    const defined = new Set([
      ...get('Environment').map((v) => v.split('=')[0]!),
      ...[...envExample.matchAll(/^([A-Z_][A-Z0-9_]*)=/gm)].map((m) => m[1]!),
    ]);
    const used = [...execStart.matchAll(/\$\{?([A-Z_][A-Z0-9_]*)\}?/g)].map((m) => m[1]!);
    expect(used).toEqual(expect.arrayContaining(['ADV_REPO', 'ADV_HTTP']));
    for (const v of used) expect(defined, v).toContain(v);
    for (const v of ['ADV_REPO', 'ADV_GIT_TOKEN', 'ADV_WEBHOOK_SECRET'])
      expect(envExample).toMatch(new RegExp(`^${v}=`, 'm'));
  });

  it('uses only flags that `adv controller` has', async () => {
    const help = await helpOf('controller');
    expect(flagsOf(argv)).toEqual(expect.arrayContaining(['--repo', '--data-dir', '--http', '--log-level']));
    for (const f of flagsOf(argv)) expect(help, f).toContain(f);
  });

  if (!onPath('systemd-analyze'))
    console.warn(
      'SKIPPING systemd-analyze verify: systemd is not installed (the unit checks above still ran)',
    );
  it.skipIf(!onPath('systemd-analyze'))('passes systemd-analyze verify', () => {
    const r = spawnSync('systemd-analyze', ['verify', unitFile], { encoding: 'utf8' });
    const ours = (r.stdout + r.stderr)
      .split('\n')
      .filter((l) => l.includes(basename(unitFile)) && /Unknown|Failed|Invalid|ignoring/i.test(l));
    expect(ours).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------

describe('deploy/worker/install.sh', () => {
  const script = join(deploy, 'worker', 'install.sh');
  const bash = onPath('bash')!;
  let tmp: string;
  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-deploy-'));
  });
  afterAll(() => rm(tmp, { recursive: true, force: true }));

  const run = (args: string[], env: NodeJS.ProcessEnv = {}) =>
    spawnSync(bash, [script, ...args], {
      encoding: 'utf8',
      env: { ...process.env, HOME: tmp, ...env },
      timeout: 60_000, // a hang guard, never a window
    });
  const mode = (p: string) => statSync(p).mode & 0o777;

  it('is valid bash with strict mode', () => {
    expect(spawnSync(bash, ['-n', script]).status).toBe(0);
    expect(readFileSync(script, 'utf8')).toMatch(/^#!\/usr\/bin\/env bash\n[\s\S]*^set -euo pipefail$/m);
  });

  it('on this machine (Node 20, python3): exit 0, the root and its subfolders with mode 700, idempotent', () => {
    const dir = join(tmp, 'root');
    const first = run(['--root', dir]);
    expect(first.status, first.stdout + first.stderr).toBe(0);
    expect(first.stdout).toContain('READY');
    expect(first.stdout).toMatch(/^ {4}root: ~\/root$/m); // under HOME: written with ~ for the spec
    const outside = run(['--root', join(tmp, 'root')], { HOME: '/nonexistent' });
    expect(outside.stdout).toMatch(new RegExp(`^ {4}root: ${dir}$`, 'm'));
    for (const d of ['', 'code', 'runtime', 'work', 'logs']) expect(mode(join(dir, d)), d).toBe(0o700);
    const again = run(['--root', dir]);
    expect(again.status).toBe(0);
    for (const d of ['', 'code', 'runtime', 'work', 'logs']) expect(mode(join(dir, d)), d).toBe(0o700);
  });

  it('--check creates nothing; the default root is ~/.adventuretime, printed as such', () => {
    const r = run(['--check']);
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(existsSync(join(tmp, '.adventuretime'))).toBe(false);
    expect(r.stdout).toMatch(/^ {4}root: ~\/\.adventuretime$/m);
  });

  it('without node on PATH: exit 1, Node.js named as missing, with how to install it', async () => {
    const bin = join(tmp, 'bin-no-node');
    await mkdir(bin);
    for (const tool of ['mkdir', 'chmod', 'stat', 'tar', 'gzip', 'setsid', 'nohup', 'python3']) {
      const at = onPath(tool);
      if (at) await symlink(at, join(bin, tool));
    }
    const r = run(['--root', join(tmp, 'root2')], { PATH: bin });
    expect(r.status, r.stdout + r.stderr).toBe(1);
    expect(r.stdout).toMatch(/MISSING +Node\.js >= 20: node is not in PATH/);
    expect(r.stdout).toContain('Debian/Ubuntu:');
    expect(r.stdout).toContain('RHEL/Rocky/Alma/Fedora:');
    expect(r.stdout).toMatch(/NOT READY: missing Node\.js >= 20/);
    expect(mode(join(tmp, 'root2', 'work'))).toBe(0o700); // still prepared the root
  });

  it('with Node.js 18: exit 1, naming the version found', async () => {
    const bin = join(tmp, 'bin-old-node');
    await mkdir(bin);
    await writeFile(join(bin, 'node'), '#!/bin/sh\necho v18.19.1\n');
    await chmod(join(bin, 'node'), 0o755);
    const r = run(['--check', '--root', join(tmp, 'root3')], {
      ...process.env,
      PATH: `${bin}:${process.env.PATH}`,
    });
    expect(r.status).toBe(1);
    expect(r.stdout).toContain('found v18.19.1');
    expect(existsSync(join(tmp, 'root3'))).toBe(false);
  });

  it('refuses to chmod a shared dir (sticky, like /tmp) or the home dir, and rejects unknown flags', async () => {
    const shared = join(tmp, 'shared');
    await mkdir(shared);
    await chmod(shared, 0o1777);
    for (const dir of [shared, tmp]) {
      const r = run(['--root', dir]);
      expect(r.status, dir).toBe(1);
      expect(r.stdout).toContain('MISSING  a dedicated root');
    }
    expect(mode(shared)).toBe(0o777);
    expect(run(['--bogus']).status).toBe(2);
  });
});

// ---------------------------------------------------------------------------------------------

describe('deploy/github/adv-plan.yml', () => {
  const wf = parseYaml(join(deploy, 'github', 'adv-plan.yml'))[0]!;
  const steps = Object.values(wf.jobs as Obj).flatMap((j: Obj) => j.steps as Obj[]);
  const planIndex = steps.findIndex((s) => /\badv plan\b/.test(s.run ?? ''));
  const plan = steps[planIndex]!;
  const commentIndex = steps.findIndex(
    (s) => String(s.uses ?? '').startsWith('actions/github-script@') || /\bgh pr comment\b/.test(s.run ?? ''),
  );
  const comment = steps[commentIndex]!;

  it('runs on pull requests that touch specs, and may comment', () => {
    expect(wf.on.pull_request).toBeDefined();
    expect(wf.on.pull_request.paths.length).toBeGreaterThan(0);
    expect(wf.permissions['pull-requests']).toBe('write');
  });

  it('checks out the specs with history, fetches the status branch, builds a pinned AdventureTime on Node 20', () => {
    const checkouts = steps.filter((s) => String(s.uses ?? '').startsWith('actions/checkout@'));
    const specs = checkouts.find((s) => !s.with?.repository)!;
    expect(specs.with['fetch-depth']).toBe(0);
    expect(steps.some((s) => /git fetch .*adventuretime\/status/.test(s.run ?? ''))).toBe(true);
    const adv = checkouts.find((s) => s.with?.repository)!;
    expect(adv.with.ref).toBeTruthy();
    expect(wf.env.ADV_REPOSITORY).toBeTruthy();
    expect(wf.env.ADV_REF).toBeTruthy();
    const node = steps.find((s) => String(s.uses ?? '').startsWith('actions/setup-node@'))!;
    expect(String(node.with['node-version'])).toBe('20');
    expect(steps.some((s) => /npm ci/.test(s.run ?? '') && /npm run build/.test(s.run ?? ''))).toBe(true);
  });

  it('plans with -o markdown, comments by a marker, then fails on a non-zero plan', async () => {
    expect(plan.run).toMatch(/adv plan --base "origin\/\$BASE_REF" --head HEAD -o markdown/);
    expect(plan.env.BASE_REF).toBe('${{ github.base_ref }}');
    for (const f of flagsOf(plan.run.split(/\s+/))) expect(await helpOf('plan'), f).toContain(f);
    expect(comment.with.script).toContain('<!-- adventuretime-plan -->');
    expect(comment.with.script).toContain('updateComment');
    expect(commentIndex).toBeGreaterThan(planIndex);
    const failIndex = steps.findIndex((s) => /exit-code != '0'/.test(s.if ?? ''));
    expect(failIndex).toBeGreaterThan(commentIndex);
    expect(steps[failIndex]!.run).toMatch(/exit 1/);
  });

  describe('its plan step and comment script, run here', () => {
    let tmp: string;
    let work: string;
    const adv = join(root, 'dist', 'cli', 'adv.js');
    const gitEnv = {
      ...process.env,
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@example.com',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@example.com',
    };
    const sh = (cmd: string, cwd = work) =>
      execFileSync('sh', ['-c', cmd], { cwd, env: gitEnv, encoding: 'utf8' });

    beforeAll(async () => {
      tmp = await mkdtemp(join(tmpdir(), 'adv-deploy-gh-'));
      await mkdir(join(tmp, 'bin'));
      // The workflow's `adv` shim, as its build step writes it.
      await writeFile(join(tmp, 'bin', 'adv'), `#!/bin/sh\nexec node "${adv}" "$@"\n`);
      await chmod(join(tmp, 'bin', 'adv'), 0o755);
      execFileSync(process.execPath, [adv, 'init', join(tmp, 'origin')], { env: { ...gitEnv, HOME: tmp } });
      sh(`git clone -q origin work`, tmp);
      work = join(tmp, 'work');
      // As in the workflow: fetch the status branch, tolerating its absence.
      sh(
        'git fetch -q --no-tags origin adventuretime/status:refs/remotes/origin/adventuretime/status || true',
      );
    });
    afterAll(() => rm(tmp, { recursive: true, force: true }));

    /** Runs the plan step's script as Actions would (bash -e), returns its outputs. */
    function planStep() {
      const out = join(tmp, 'github_output');
      rmSync(out, { force: true }); // a fresh file per step, as on Actions
      execFileSync('bash', ['-e', '-c', plan.run], {
        cwd: work,
        env: {
          ...gitEnv,
          HOME: tmp,
          PATH: `${join(tmp, 'bin')}:${process.env.PATH}`,
          RUNNER_TEMP: tmp,
          GITHUB_OUTPUT: out,
          BASE_REF: 'main',
        },
        stdio: 'pipe',
      });
      const outputs = readFileSync(out, 'utf8');
      return {
        exit: /^exit-code=(\d+)$/m.exec(outputs)![1]!,
        md: readFileSync(join(tmp, 'plan.md'), 'utf8'),
      };
    }

    /** Runs the github-script body with a fake GitHub holding `existing` comments. */
    async function commentScript(exit: string, existing: { id: number; body: string; type: string }[]) {
      const calls: { op: string; args: Obj }[] = [];
      const github = {
        rest: {
          issues: {
            listComments: 'listComments',
            createComment: async (a: Obj) => void calls.push({ op: 'create', args: a }),
            updateComment: async (a: Obj) => void calls.push({ op: 'update', args: a }),
          },
        },
        paginate: async () => existing.map((c) => ({ id: c.id, body: c.body, user: { type: c.type } })),
      };
      const context = {
        repo: { owner: 'lab', repo: 'specs' },
        issue: { number: 7 },
        payload: { pull_request: { head: { sha: 'abcdef1234567' } } },
        serverUrl: 'https://github.example.com',
        runId: 42,
      };
      const env = {
        PLAN_FILE: join(tmp, 'plan.md'),
        ERR_FILE: join(tmp, 'plan.err'),
        PLAN_EXIT: exit,
        ADV_REF: 'v0.1.0',
      };
      const AsyncFunction = Object.getPrototypeOf(async () => undefined).constructor as new (
        ...a: string[]
      ) => (...v: unknown[]) => Promise<void>;
      const { createRequire } = await import('node:module');
      await new AsyncFunction('require', 'github', 'context', 'process', comment.with.script)(
        createRequire(import.meta.url),
        github,
        context,
        { env },
      );
      return calls;
    }

    it('a valid change: exit-code 0, a Markdown plan, one new comment, then an update of it', async () => {
      sh(
        'git checkout -q -b change && sed -i "s/name: hello$/name: hello-2/" runs/hello.yaml && git commit -qam rename',
      );
      const r = planStep();
      expect(r.exit).toBe('0');
      expect(r.md).toMatch(/^### AdventureTime plan/);
      expect(r.md).toMatch(/\| \+ \| `hello-2` \| start \|/);

      const created = await commentScript(r.exit, [{ id: 1, body: 'LGTM', type: 'User' }]);
      expect(created.map((c) => c.op)).toEqual(['create']);
      const body = created[0]!.args.body as string;
      expect(body.startsWith('<!-- adventuretime-plan -->\n\n### AdventureTime plan')).toBe(true);
      expect(created[0]!.args).toMatchObject({ owner: 'lab', repo: 'specs', issue_number: 7 });

      const updated = await commentScript(r.exit, [
        { id: 1, body: 'LGTM', type: 'User' },
        { id: 2, body, type: 'Bot' },
      ]);
      expect(updated).toEqual([{ op: 'update', args: expect.objectContaining({ comment_id: 2 }) }]);
    });

    it('an invalid spec: exit-code 1, the error with file:line in the comment, and the job would fail', async () => {
      await writeFile(
        join(work, 'runs', 'bad.yaml'),
        readFileSync(join(work, 'runs', 'hello.yaml'), 'utf8')
          .replace('name: hello-2', 'name: bad')
          .replace('spec:', 'spec:\n  comand: [x]'),
      );
      sh('git add runs/bad.yaml && git commit -qm bad');
      const r = planStep();
      expect(r.exit).toBe('1');
      expect(r.md).toMatch(/`runs\/bad\.yaml:\d+:\d+`/);
      const calls = await commentScript(r.exit, []);
      expect(calls[0]!.args.body).toContain('HEAD has invalid specs');
      const fail = steps.find((s) => /exit-code != '0'/.test(s.if ?? ''))!;
      const res = spawnSync('bash', ['-e', '-c', fail.run], {
        env: { ...process.env, PLAN_EXIT: r.exit },
        encoding: 'utf8',
      });
      expect(res.status).toBe(1);
      expect(res.stdout).toContain('::error::HEAD has invalid specs');
    });
  });
});

// ---------------------------------------------------------------------------------------------

describe('docs/deploy.md', () => {
  it('has a section for, and names, every file under deploy/', async () => {
    const doc = await readFile(join(root, 'docs', 'deploy.md'), 'utf8');
    for (const f of filesUnder(deploy)) expect(doc, relative(root, f)).toContain(relative(root, f));
    expect(doc).toMatch(/not tested/i);
    expect(doc).toContain('test/deploy.test.ts');
  });
});

// ---------------------------------------------------------------------------------------------

describe('deploy/worker/enroll-agent.sh', () => {
  const script = join(deploy, 'worker', 'enroll-agent.sh');
  let tmp: string;
  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-enroll-'));
    // `adv` on the PATH is the built CLI (the integration suite's global setup builds it).
    await mkdir(join(tmp, 'bin'));
    // A node script, as the installed `adv` is: the script finds Node through its "#!" line.
    await writeFile(
      join(tmp, 'bin', 'adv'),
      `#!/usr/bin/env node\nawait import(${JSON.stringify(join(root, 'dist', 'cli', 'adv.js'))});\n`,
      { mode: 0o755 },
    );
    await writeFile(join(tmp, 'bin', 'package.json'), '{"type": "module"}\n');
    await writeFile(join(tmp, 'token'), 'an-enrollment-token-for-the-test\n', { mode: 0o600 });
  });
  afterAll(() => rm(tmp, { recursive: true, force: true }));

  const enroll = (...args: string[]) =>
    spawnSync('bash', [script, ...args], {
      env: { ...process.env, PATH: `${join(tmp, 'bin')}:${process.env.PATH}` },
      encoding: 'utf8',
    });
  const user = execFileSync('id', ['-un'], { encoding: 'utf8' }).trim();

  it('a dry run renders a unit whose ExecStart uses only flags adv agent has, and never shows the token', () => {
    const r = enroll(
      '--controller',
      'https://adv.lab.example',
      '--token-file',
      join(tmp, 'token'),
      '--user',
      user,
      '--name',
      'desk-3',
      '--label',
      'room=b12',
      '--pool',
      'desks',
      '--dry-run',
      '--',
      '--slots',
      '2',
    );
    expect(r.status, r.stderr + r.stdout).toBe(0);
    const out = r.stdout + r.stderr;
    expect(out).not.toContain('an-enrollment-token-for-the-test');
    const exec = /ExecStart=(\S+) agent (.*)/.exec(out)!;
    expect(exec[2]).toContain('--name desk-3');
    expect(exec[2]).toContain('--label room=b12');
    expect(exec[2]).toContain('--slots 2');
    const help = execFileSync(process.execPath, [join(root, 'dist', 'cli', 'adv.js'), 'agent', '--help'], {
      encoding: 'utf8',
    });
    for (const flag of exec[2]!.split(/\s+/).filter((w) => w.startsWith('--')))
      expect(help, flag).toContain(flag);
    expect(out).toMatch(/KillMode=process/);
  });

  it.each([
    [['--label', 'room=b12;rm -rf /'], 2],
    [['--name', 'Not_A_Label'], 2],
    [['--controller', 'ftp://x'], 2],
  ])('refuses %j with a usage error', (extra, code) => {
    const base = [
      '--controller',
      'https://adv.lab.example',
      '--token-file',
      join(tmp, 'token'),
      '--user',
      user,
    ];
    const r = enroll(...base, ...extra, '--dry-run');
    expect(r.status, r.stdout + r.stderr).toBe(code);
  });
});
