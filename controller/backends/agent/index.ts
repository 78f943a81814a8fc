/**
 * `agent`: hosts the controller cannot reach (behind NAT, a campus firewall) run `adv agent`, which
 * claims attempts from the controller's HTTP API, runs them under `adv exec` and reports back
 * (docs/backends.md#agent). The controller owns the queue (`hub.ts`); agents enroll with the
 * Backend's `tokenSecret` and hold each attempt under a lease with a fencing epoch.
 */
import { Type } from '@sinclair/typebox';
import { ENV_NAME, optional, strict } from '../../spec/schema-kit.js';
import { ONE_HOST_TRAITS, type AdapterDescriptor } from '../types.js';
import { AgentBackend } from './adapter.js';

/** The `agent:` block (required for this type). */
export const agentSettings = {
  block: 'agent',
  required: true,
  schema: strict(
    {
      pool: optional(
        Type.String({
          pattern: '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$',
          description: 'Agents of this pool claim this backend’s jobs. Default: the Backend’s name.',
        }),
      ),
      tokenSecret: Type.String({
        pattern: ENV_NAME,
        description:
          'The secret (resolved like a Run’s secrets) agents enroll with; each agent gets its own token in exchange.',
      }),
      staleAfterSec: optional(
        Type.Integer({
          minimum: 10,
          description:
            'A claim without a heartbeat this long is lost: the attempt ends `Lost` and resumes elsewhere. Default 120.',
        }),
      ),
      selector: optional(
        Type.Record(Type.String(), Type.String(), {
          description: 'Labels an agent must carry (`adv agent --label k=v`) to take this backend’s jobs.',
        }),
      ),
    },
    '`agent` settings.',
  ),
} as const;

/** `agent`: a controller-owned queue that hosts pull from; each job runs on one host. */
export const agentBackend: AdapterDescriptor<'agent', typeof agentSettings> = {
  type: 'agent',
  settings: agentSettings,
  needsConnection: false,
  traits: { ...ONE_HOST_TRAITS, queuesWhenFull: true, billsFrom: 'started' },
  create(spec, ctx) {
    return new AgentBackend(spec, ctx);
  },
};
