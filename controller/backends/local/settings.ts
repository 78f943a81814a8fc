/** The `local:` settings block of a Backend (optional for this type). */
import { Type } from '@sinclair/typebox';
import { optional, strict } from '../../spec/schema-kit.js';

/** The `local:` block. */
export const localSettings = {
  block: 'local',
  required: false,
  schema: strict(
    {
      workDir: optional(Type.String({ description: 'Where job work dirs go. Default `<data-dir>/local`.' })),
      user: optional(
        Type.String({
          pattern: '^[a-z_][a-z0-9_-]{0,31}$',
          description:
            "The system user jobs run as, instead of the controller's own (which a job could read the controller's credentials as). The controller must run as root; the jobs dir's parents must be searchable by that user.",
        }),
      ),
    },
    '`local` settings.',
  ),
} as const;
