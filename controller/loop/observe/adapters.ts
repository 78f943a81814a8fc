/**
 * The backend adapters of the loaded Backend specs: made when a spec appears or changes, closed
 * when it changes again. A removed or suspended backend keeps its adapter, so the attempts still on
 * it are observed to their end; it only takes no new work.
 */
import type { Logger } from 'pino';
import { backendInfoOf, descriptorFor, unusableBecause } from '../../backends/registry.js';
import type { Backend, BackendContext, BackendDescriptor, JobRequest } from '../../backends/types.js';
import type { BackendInfo } from '../../reconcile/solver.js';
import type { Backend as BackendObject } from '../../spec/schema.js';

/** A Backend spec as loaded, with its generation (adapters are remade when it changes). */
export interface LoadedBackend {
  obj: BackendObject;
  gen: string;
}

interface Adapter {
  instance?: Backend;
  info: BackendInfo;
  gen: string;
}

/**
 * The context each backend's adapter is made with: the shared ports, its own child logger, and
 * `requestFor` bound to its name.
 */
export function contextsOf(
  shared: Omit<BackendContext, 'requestFor'>,
  requestFor: (backend: string, jobName: string) => JobRequest | undefined,
): (name: string) => BackendContext {
  return (name) => ({
    ...shared,
    logger: shared.logger.child({ backend: name }),
    requestFor: (jobName) => requestFor(name, jobName),
  });
}

export class BackendAdapters {
  private readonly adapters = new Map<string, Adapter>();
  private specs = new Map<string, LoadedBackend>();

  constructor(
    private readonly descriptors: readonly BackendDescriptor[],
    /** The context an adapter of this backend is made with (its logger, the injected ports). */
    private readonly contextFor: (name: string) => BackendContext,
    private readonly logger: Logger,
  ) {}

  /** Makes, remakes or retires adapters for the Backend specs now in the repo. */
  async sync(specs: ReadonlyMap<string, LoadedBackend>): Promise<void> {
    this.specs = new Map(specs);
    for (const [name, { obj, gen }] of specs) {
      const cur = this.adapters.get(name);
      if (cur && cur.gen === gen) continue;
      await cur?.instance?.close?.();
      this.adapters.set(name, { ...(await this.make(name, obj)), gen });
    }
    for (const [name, a] of this.adapters) {
      if (!specs.has(name)) a.info = { ...a.info, usable: false, why: 'the Backend spec was removed' };
    }
  }

  private async make(name: string, obj: BackendObject): Promise<Omit<Adapter, 'gen'>> {
    const descriptor = descriptorFor(obj.spec.type, this.descriptors);
    let why = unusableBecause(obj.spec, this.descriptors);
    let instance: Backend | undefined;
    // A suspended backend still polls its live jobs; it only takes no new ones.
    if (descriptor?.create && (!why || obj.spec.suspend)) {
      try {
        instance = await descriptor.create(obj, this.contextFor(name));
      } catch (e) {
        why = `cannot start adapter: ${e instanceof Error ? e.message : String(e)}`;
        this.logger.warn({ backend: name, err: why }, 'backend adapter not started');
      }
    }
    return {
      ...(instance ? { instance } : {}),
      info: backendInfoOf(name, obj.spec, this.descriptors, why),
    };
  }

  /** The adapter for a backend name, while one exists (removed specs included). */
  instance(name: string): Backend | undefined {
    return this.adapters.get(name)?.instance;
  }

  /**
   * Closes a backend's adapter and makes a new one from the same spec, as a changed spec or a
   * restarted controller does: the new adapter knows only what it finds (the backend contract
   * suite checks that it finds every live job).
   */
  async restart(name: string): Promise<Backend | undefined> {
    const spec = this.specs.get(name);
    if (!spec) return undefined;
    await this.adapters.get(name)?.instance?.close?.();
    this.adapters.set(name, { ...(await this.make(name, spec.obj)), gen: spec.gen });
    return this.instance(name);
  }

  /** Every adapter that exists (removed and suspended backends' included). */
  all(): [string, Backend][] {
    const out: [string, Backend][] = [];
    for (const [name, a] of this.adapters) if (a.instance) out.push([name, a.instance]);
    return out;
  }

  /** What the solver knows of each backend whose spec is in the repo now. */
  infos(): BackendInfo[] {
    return [...this.adapters.values()].filter((a) => this.specs.has(a.info.name)).map((a) => a.info);
  }

  /** Adapters that can be asked for capacity now. */
  usable(): [string, Backend][] {
    const out: [string, Backend][] = [];
    for (const [name, a] of this.adapters) if (a.instance && a.info.usable) out.push([name, a.instance]);
    return out;
  }

  async close(): Promise<void> {
    for (const a of this.adapters.values()) await a.instance?.close?.();
  }
}
