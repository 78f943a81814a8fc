/**
 * Checkpoint retention: which committed checkpoints of a run the store keeps (`policy.checkpoints`).
 * `planRetention` is pure; `collectCheckpoints` does the I/O for `adv ckpt gc`, and
 * `RetentionKeeper` for `adv exec`, which applies the run's policy after each commit.
 *
 * Two steps are never deleted, whatever the policy says: the newest committed one (what the next
 * attempt restores) and any step the caller protects (one a live attempt restored from, or may
 * still restore when a newer one fails to verify). A step the keepBest metric has not been logged
 * up to yet is kept too: its value is not known, so it may be the best.
 */
import { listCheckpoints, MANIFEST, stepPrefix, type CheckpointManifest } from './checkpoint.js';
import { metricAt, readRunMetrics, runCurve } from './metrics.js';
import type { ObjectStore } from './store/types.js';
import { bounded } from './bounded.js';

/** How long adv exec waits at its end for a retention pass still under way. */
export const SETTLE_MS = 60_000;

/** `policy.checkpoints` of a Run spec (controller/spec/schema.ts RetentionSchema declares it). */
export interface RetentionPolicy {
  /** Keep the newest N committed checkpoints. */
  keepLast?: number;
  /** Keep every checkpoint whose step is a multiple of N. */
  keepEvery?: number;
  /** Keep the `count` (default 1) checkpoints with the best value of `metric` at their step. */
  keepBest?: { metric: string; mode: 'min' | 'max'; count?: number };
}

/** The variable that carries `policy.checkpoints` (JSON) to `adv exec`. */
export const RETENTION_ENV = 'ADV_RETENTION';

/** What to keep and delete, newest first, and why, per step. */
export interface RetentionPlan {
  keep: number[];
  delete: number[];
  why: Map<number, string>;
}

/** True when the policy names at least one rule (an empty policy deletes nothing). */
export const hasRules = (p: RetentionPolicy): boolean =>
  p.keepLast !== undefined || p.keepEvery !== undefined || p.keepBest !== undefined;

/**
 * The plan for the committed steps `committed`: a step is kept when any rule (or a protection)
 * keeps it, else deleted. `curve` is the run's curve of `policy.keepBest.metric` (runtime/metrics.ts
 * `runCurve(...).points`), needed only with keepBest.
 */
export function planRetention(
  committed: readonly number[],
  curve: readonly { step: number; value: number }[],
  policy: RetentionPolicy,
  protect: readonly number[] = [],
): RetentionPlan {
  const steps = [...new Set(committed)].sort((a, b) => b - a);
  const why = new Map<number, string[]>();
  const keepFor = (s: number, reason: string) => why.set(s, [...(why.get(s) ?? []), reason]);
  if (steps.length) keepFor(steps[0]!, 'the newest committed');
  for (const s of protect) if (steps.includes(s)) keepFor(s, 'a live attempt restored it');
  if (!hasRules(policy)) for (const s of steps) keepFor(s, 'no retention rule');
  if (policy.keepLast)
    for (const s of steps.slice(0, policy.keepLast)) keepFor(s, `among the newest ${policy.keepLast}`);
  if (policy.keepEvery)
    for (const s of steps) if (s % policy.keepEvery === 0) keepFor(s, `a multiple of ${policy.keepEvery}`);
  if (policy.keepBest) keepBest(steps, curve, policy.keepBest, keepFor);
  const out: RetentionPlan = { keep: [], delete: [], why: new Map() };
  for (const s of steps) {
    const reasons = why.get(s);
    (reasons ? out.keep : out.delete).push(s);
    out.why.set(s, reasons ? reasons.join('; ') : deleteReason(policy));
  }
  return out;
}

function keepBest(
  steps: readonly number[],
  curve: readonly { step: number; value: number }[],
  best: NonNullable<RetentionPolicy['keepBest']>,
  keepFor: (s: number, reason: string) => void,
): void {
  const lastLogged = Math.max(-1, ...curve.map((p) => p.step));
  const scored: { step: number; value: number }[] = [];
  for (const s of steps) {
    const value = s <= lastLogged ? metricAt(curve, s) : undefined;
    // Logged past neither this step nor at all before it: unknown, so possibly the best.
    if (value === undefined) keepFor(s, `${best.metric} not logged up to this step yet`);
    else scored.push({ step: s, value });
  }
  const sign = best.mode === 'min' ? 1 : -1;
  scored.sort((a, b) => sign * (a.value - b.value) || b.step - a.step);
  const count = best.count ?? 1;
  scored
    .slice(0, count)
    .forEach((p, i) =>
      keepFor(
        p.step,
        `${count > 1 ? `best ${i + 1} of ${count}` : 'the best'} by ${best.metric} (${best.mode}: ${p.value})`,
      ),
    );
}

function deleteReason(p: RetentionPolicy): string {
  const rules = [
    ...(p.keepLast ? [`not among the newest ${p.keepLast}`] : []),
    ...(p.keepEvery ? [`not a multiple of ${p.keepEvery}`] : []),
    ...(p.keepBest ? [`not among the ${p.keepBest.count ?? 1} best by ${p.keepBest.metric}`] : []),
  ];
  return rules.join(', ');
}

/**
 * Reads a policy from its JSON (`ADV_RETENTION`); throws saying what is wrong. Checked again here:
 * adv exec may be started by hand.
 */
export function parseRetention(json: string): RetentionPolicy {
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch (e) {
    throw new Error(`${RETENTION_ENV} is not JSON: ${(e as Error).message}`);
  }
  const o = (typeof v === 'object' && v !== null && !Array.isArray(v) ? v : undefined) as
    Record<string, unknown> | undefined;
  if (!o) throw new Error(`${RETENTION_ENV} must be an object like {"keepLast":3}`);
  const count = (k: string, x: unknown) => {
    if (x !== undefined && (!Number.isSafeInteger(x) || (x as number) < 1))
      throw new Error(`${RETENTION_ENV}: ${k} must be a whole number ≥ 1, not ${JSON.stringify(x)}`);
  };
  count('keepLast', o.keepLast);
  count('keepEvery', o.keepEvery);
  const b = o.keepBest as Record<string, unknown> | undefined;
  if (b !== undefined) {
    if (typeof b !== 'object' || b === null || typeof b.metric !== 'string' || !b.metric)
      throw new Error(`${RETENTION_ENV}: keepBest needs a metric name, like {"metric":"loss","mode":"min"}`);
    if (b.mode !== 'min' && b.mode !== 'max')
      throw new Error(`${RETENTION_ENV}: keepBest.mode is min or max, not ${JSON.stringify(b.mode)}`);
    count('keepBest.count', b.count);
  }
  return o as RetentionPolicy;
}

/** Parses `metric:min` / `metric:max` (`adv ckpt gc --keep-best`). */
export function parseKeepBest(s: string): NonNullable<RetentionPolicy['keepBest']> {
  const m = /^(.+):(min|max)(?::(\d+))?$/.exec(s.trim());
  if (!m)
    throw new Error(
      `--keep-best takes METRIC:min or METRIC:max (optionally :COUNT), not ${JSON.stringify(s)}`,
    );
  return { metric: m[1]!, mode: m[2] as 'min' | 'max', ...(m[3] ? { count: Number(m[3]) } : {}) };
}

/** The run's curve of the keepBest metric, read from the store (empty without keepBest). */
async function curveFor(store: ObjectStore, run: string, p: RetentionPolicy) {
  if (!p.keepBest) return [];
  return runCurve(await readRunMetrics(store, run), p.keepBest.metric).points;
}

/** Deletes one step: its manifest first, so a deletion cut short leaves garbage, never a checkpoint missing files. */
async function deleteStep(store: ObjectStore, run: string, step: number): Promise<string[]> {
  const keys: string[] = [];
  for await (const o of store.list(stepPrefix(run, step))) keys.push(o.key);
  const manifest = keys.filter((k) => k.endsWith('/' + MANIFEST));
  await store.delete(manifest);
  await store.delete(keys.filter((k) => !k.endsWith('/' + MANIFEST)));
  return keys;
}

export interface CollectOptions {
  policy: RetentionPolicy;
  /** Steps never deleted (a live attempt's restore). */
  protect?: readonly number[];
  /** Step dirs with no verifying manifest younger than this are left alone (an upload may be running). */
  graceMs?: number;
  dryRun?: boolean;
  now?: number;
}

/**
 * `adv ckpt gc` for one run: the committed steps the policy does not keep, and step dirs without a
 * manifest that verifies (older than the grace period). Returns the plan and the keys deleted (or,
 * dry, that would be).
 */
export async function collectCheckpoints(
  store: ObjectStore,
  run: string,
  o: CollectOptions,
): Promise<{ plan: RetentionPlan; garbage: number[]; deleted: string[] }> {
  const now = o.now ?? Date.now();
  const infos = await listCheckpoints(store, run);
  const committed = infos.filter((i) => i.manifest && !i.problem).map((i) => i.step);
  const plan = planRetention(committed, await curveFor(store, run, o.policy), o.policy, o.protect);
  const garbage: number[] = [];
  for (const i of infos) {
    if (i.manifest && !i.problem) continue;
    let newest = 0;
    for await (const x of store.list(stepPrefix(run, i.step)))
      newest = Math.max(newest, x.lastModified?.getTime() ?? 0);
    if (now - newest >= (o.graceMs ?? 3_600_000)) garbage.push(i.step);
  }
  const deleted: string[] = [];
  for (const step of [...plan.delete, ...garbage]) {
    if (!o.dryRun) deleted.push(...(await deleteStep(store, run, step)));
    else for await (const x of store.list(stepPrefix(run, step))) deleted.push(x.key);
  }
  return { plan, garbage, deleted };
}

/**
 * `adv exec`'s side (process 0): after each commit, deletes the committed steps the policy does
 * not keep. One pass at a time; commits during a pass make one more pass after it. Never touches a
 * step without a manifest (it may be an upload under way): that is `adv ckpt gc`'s.
 */
export class RetentionKeeper {
  private running: Promise<void> = Promise.resolve();
  private queued = false;

  constructor(
    private readonly o: {
      store: ObjectStore;
      run: string;
      policy: RetentionPolicy;
      log: (line: string) => void;
    },
  ) {}

  private newest: number | undefined;

  /** A step committed: apply the policy (not awaited by the caller). */
  committed(m: Pick<CheckpointManifest, 'step'>): void {
    this.newest = Math.max(m.step, this.newest ?? m.step);
    if (this.queued) return;
    this.queued = true;
    this.running = this.running.then(() => this.pass(this.newest!));
  }

  /**
   * At adv exec's end, after the final writes (the last metrics among them): one more pass when
   * this attempt committed anything, so keepBest judges with every point the attempt logged; then
   * waits for it (bounded).
   */
  async finish(boundMs = SETTLE_MS): Promise<void> {
    if (this.newest !== undefined) this.committed({ step: this.newest });
    await this.settled(boundMs);
  }

  /** Resolves once no pass is under way or queued, or after `boundMs` (adv exec's end is bounded). */
  async settled(boundMs = SETTLE_MS): Promise<void> {
    const all = (async () => {
      let seen: Promise<void> | undefined;
      while (seen !== this.running) {
        seen = this.running;
        await seen;
      }
    })();
    await bounded('applying the retention policy', all, Date.now() + boundMs, this.o.log);
  }

  private async pass(newest: number): Promise<void> {
    this.queued = false;
    const { store, run, policy, log } = this.o;
    try {
      const infos = await listCheckpoints(store, run);
      const committed = infos.filter((i) => i.manifest && !i.problem).map((i) => i.step);
      const plan = planRetention(committed, await curveFor(store, run, policy), policy, [newest]);
      for (const step of plan.delete) {
        await deleteStep(store, run, step);
        log(`retention: deleted checkpoint ${step} (${plan.why.get(step)})`);
      }
    } catch (e) {
      log(
        `warning: retention after checkpoint ${newest} failed: ${(e as Error).message}; adv ckpt gc can apply it later`,
      );
    }
  }
}

/**
 * The keeper for `adv exec` when `env` carries a policy (`ADV_RETENTION`); undefined without one,
 * and, with one that does not parse, undefined after saying why (the workload runs regardless).
 */
export function retentionFromEnv(
  env: NodeJS.ProcessEnv,
  store: ObjectStore,
  run: string,
  log: (line: string) => void,
): RetentionKeeper | undefined {
  const raw = env[RETENTION_ENV];
  if (!raw) return undefined;
  try {
    const policy = parseRetention(raw);
    return hasRules(policy) ? new RetentionKeeper({ store, run, policy, log }) : undefined;
  } catch (e) {
    log(`warning: ${(e as Error).message}; no checkpoint is deleted by this attempt`);
    return undefined;
  }
}
