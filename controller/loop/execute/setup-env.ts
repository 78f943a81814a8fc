/**
 * The one place a job's setup is composed: the Backend's steps, then the Environment's (its
 * modules as `module load` steps, its variables, its steps), then the run's; and the uv settings
 * of the Environment with the uv version the Backend pins. Every backend delivers the result to
 * `adv exec` as `ADV_SETUP` and `ADV_UV` (`backends/job-env.ts`), which runs it in one shell.
 */
import type { SetupItem, UvSettings } from '../../backends/types.js';
import type { ResolvedEnvironment } from '../../spec/environments.js';
import type { BackendSpec, RunSpec } from '../../spec/schema.js';

/** What a job gets of its Backend, Environment and run besides its command. */
export interface ComposedSetup {
  setup: SetupItem[];
  uv?: UvSettings;
  image?: string;
}

export function composeSetup(
  backend: { name: string; spec: Pick<BackendSpec, 'setup' | 'uv'> } | undefined,
  environment: ResolvedEnvironment | undefined,
  run: Pick<RunSpec, 'setup'>,
): ComposedSetup {
  const setup: SetupItem[] = [];
  for (const s of backend?.spec.setup ?? []) setup.push({ from: `Backend ${backend!.name}`, run: s });
  const e = environment?.spec;
  if (environment && e) {
    const from = `Environment ${environment.name}@${environment.version}`;
    // Module names are plain words (the schema's pattern): safe as shell words.
    for (const m of e.modules ?? []) setup.push({ from, run: `module load ${m}` });
    if (e.env && Object.keys(e.env).length) setup.push({ from, env: { ...e.env } });
    for (const s of e.setup ?? []) setup.push({ from, run: s });
  }
  for (const s of run.setup ?? []) setup.push({ from: 'Run', run: s });
  const uv: UvSettings = {
    ...(e?.uv?.groups ? { groups: [...e.uv.groups] } : {}),
    ...(e?.uv?.python ? { python: e.uv.python } : {}),
    ...(e?.uv?.project ? { project: e.uv.project } : {}),
    ...(backend?.spec.uv?.version ? { version: backend.spec.uv.version } : {}),
  };
  return {
    setup,
    ...(Object.keys(uv).length ? { uv } : {}),
    ...(e?.image ? { image: e.image } : {}),
  };
}
