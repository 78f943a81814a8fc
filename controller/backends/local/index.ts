/**
 * `local`: a detached process on the controller's machine — the embedded default. See
 * `adapter.ts`.
 */
import { ONE_HOST_TRAITS, type AdapterDescriptor } from '../types.js';
import { localSettings } from './settings.js';

export { localSettings };

/** `local`: processes on the controller's machine; one host, no scheduler, no capacity report. */
export const localBackend: AdapterDescriptor<'local', typeof localSettings> = {
  type: 'local',
  settings: localSettings,
  needsConnection: false,
  traits: ONE_HOST_TRAITS,
  // Loaded when a Backend of this type is started, never by validating YAML (test/import-graph.test.ts).
  async create(spec, ctx) {
    const { createLocalBackend } = await import('./adapter.js');
    return createLocalBackend(spec, ctx);
  },
};
