/**
 * `ssh`: a plain host reached over SSH, through the remote-host module (`../remote/`). See
 * `adapter.ts`.
 */
import { ONE_HOST_TRAITS, type AdapterDescriptor } from '../types.js';

/** `ssh`: a host reached over SSH, with `connection` and optional `paths`; no settings block. */
export const sshBackend: AdapterDescriptor<'ssh', undefined> = {
  type: 'ssh',
  needsConnection: true,
  traits: ONE_HOST_TRAITS,
  // Loaded when a Backend of this type is started, never by validating YAML (test/import-graph.test.ts).
  async create(spec, ctx) {
    const { SshBackend } = await import('./adapter.js');
    return new SshBackend(spec.metadata.name, spec.spec, ctx);
  },
};
