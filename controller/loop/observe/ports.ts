/**
 * Ports the controller lends its adapters beyond the per-backend context: HTTP routes on its
 * listener (for workers that call in) and objects shared by the adapters of one type. Both live
 * as long as the controller, not as long as one adapter (a Backend spec edit remakes its adapter).
 */
import type { BackendContext, HttpHandler, HttpMounts } from '../../backends/types.js';
import type { ObjectStore } from '../../../runtime/store/types.js';

export class AdapterPorts implements HttpMounts {
  private readonly mounts = new Map<string, HttpHandler>();
  private readonly objects = new Map<string, { close?(): void | Promise<void> }>();

  mount(prefix: string, handler: HttpHandler): () => void {
    this.mounts.set(prefix, handler);
    return () => {
      if (this.mounts.get(prefix) === handler) this.mounts.delete(prefix);
    };
  }

  /** The handler of the longest mounted prefix that `path` is or lies under. */
  handlerFor(path: string): HttpHandler | undefined {
    let best: string | undefined;
    for (const p of this.mounts.keys())
      if ((path === p || path.startsWith(p + '/')) && (!best || p.length > best.length)) best = p;
    return best === undefined ? undefined : this.mounts.get(best);
  }

  shared<T extends { close?(): void | Promise<void> }>(key: string, make: () => T): T {
    let v = this.objects.get(key);
    if (!v) this.objects.set(key, (v = make()));
    return v as T;
  }

  /** What a `BackendContext` gets of these ports, with the object store's accessor. */
  lent(objects: () => ObjectStore | undefined): Pick<BackendContext, 'http' | 'shared' | 'objects'> {
    return { http: this, shared: (key, make) => this.shared(key, make), objects };
  }

  /**
   * Closes the shared objects. The routes stay mounted: a closed agent hub answers its callers
   * 503 with Retry-After until the listener itself closes, which they wait out.
   */
  async close(): Promise<void> {
    for (const v of this.objects.values()) await v.close?.();
    this.objects.clear();
  }
}
