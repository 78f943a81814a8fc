/** The `agent:` settings block of a Backend (required for this type). */
import { Type } from '@sinclair/typebox';
import { ENV_NAME, optional, strict } from '../../spec/schema-kit.js';

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
