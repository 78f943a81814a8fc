/**
 * `agent`: hosts the controller cannot reach (behind NAT, a campus firewall) run `adv agent`, which
 * claims attempts from the controller's HTTP API, runs them under `adv exec` and reports back
 * (docs/backends.md#agent). The controller owns the queue (`hub.ts`); agents enroll with the
 * Backend's `tokenSecret` and hold each attempt under a lease with a fencing epoch.
 */
import { ONE_HOST_TRAITS, type AdapterDescriptor } from '../types.js';
import { agentSettings } from './settings.js';

export { agentSettings };

/** `agent`: a controller-owned queue that hosts pull from; each job runs on one host. */
export const agentBackend: AdapterDescriptor<'agent', typeof agentSettings> = {
  type: 'agent',
  settings: agentSettings,
  needsConnection: false,
  traits: { ...ONE_HOST_TRAITS, queuesWhenFull: true, billsFrom: 'started' },
  // Loaded when a Backend of this type is started, never by validating YAML (test/import-graph.test.ts).
  async create(spec, ctx) {
    const { AgentBackend } = await import('./adapter.js');
    return new AgentBackend(spec, ctx);
  },
};
