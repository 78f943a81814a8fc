/** The Providers and Alerts the controller acts on, as the operator's infra rule yields them. */
import type { LoadedObject } from '../spec/loader.js';
import type { Alert, Provider } from '../spec/schema.js';

export interface NotifyObjects {
  providers: ReadonlyMap<string, Provider>;
  alerts: ReadonlyMap<string, Alert>;
}

export const NO_NOTIFY: NotifyObjects = { providers: new Map(), alerts: new Map() };

/** The Providers and Alerts of a load result (valid documents only). */
export function notifyObjectsOf(objects: readonly LoadedObject[]): NotifyObjects {
  const providers = new Map<string, Provider>();
  const alerts = new Map<string, Alert>();
  for (const o of objects) {
    if (o.kind === 'Provider') providers.set(o.name, o.object as Provider);
    else if (o.kind === 'Alert') alerts.set(o.name, o.object as Alert);
  }
  return providers.size || alerts.size ? { providers, alerts } : NO_NOTIFY;
}
