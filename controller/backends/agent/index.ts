/**
 * `agent`: hosts the controller cannot reach run `adv agent`, which pulls work from the
 * controller's HTTP API (claim, heartbeat, complete, fail). Declared (settings, rules, traits);
 * its adapter is not built yet, so a Backend of this type validates but takes no work
 * ("no adapter for type agent in this build yet").
 */
import { Type } from '@sinclair/typebox';
import { ENV_NAME, optional, strict } from '../../spec/schema-kit.js';
import { ONE_HOST_TRAITS, type BackendDescriptor } from '../types.js';

/** The `agent:` block (required for this type). */
export const agentSettings = {
  block: 'agent',
  required: true,
  schema: strict(
    {
      pool: optional(Type.String({ description: 'Agents of this pool claim this backend’s jobs.' })),
      tokenSecret: Type.String({ pattern: ENV_NAME, description: 'Secret agents authenticate with.' }),
      staleAfterSec: optional(
        Type.Integer({ minimum: 10, description: 'A claim without heartbeat expires.' }),
      ),
    },
    '`agent` settings.',
  ),
} as const;

/** `agent`: one claiming host per job. */
export const agentBackend: BackendDescriptor<'agent', typeof agentSettings> = {
  type: 'agent',
  settings: agentSettings,
  needsConnection: false,
  traits: ONE_HOST_TRAITS,
};
