/**
 * THE list of backend types. A new backend is a folder with one descriptor (its settings block,
 * rules, traits and adapter) and one line here; the Backend schema, the rules and the controller
 * all read this list (or a longer one a test passes in).
 */
import { agentBackend } from './agent/index.js';
import { gcpTpuBackend } from './gcp-tpu/index.js';
import { localBackend } from './local/index.js';
import { slurmBackend } from './slurm/index.js';
import { sshBackend } from './ssh/index.js';
import type { BackendInfo } from './backend-info.js';
import type { Backend as BackendObject } from '../spec/schema.js';
import { ONE_HOST_TRAITS, type BackendDescriptor, type BackendList } from './types.js';
import { vastaiBackend } from './vastai/index.js';
import { volcanoBackend } from './volcano/index.js';

/** Every backend type of this build, in the order `type`'s enum and the reference list them. */
export const BACKENDS = [
  localBackend,
  sshBackend,
  slurmBackend,
  gcpTpuBackend,
  volcanoBackend,
  vastaiBackend,
  agentBackend,
] as const;

/** The descriptor of a type in a list, or undefined. */
export function descriptorFor(type: string, list: BackendList = BACKENDS): BackendDescriptor | undefined {
  return list.find((d) => d.type === type);
}

/** Why a Backend spec cannot take new work with these adapters, or undefined when it can. */
export function unusableBecause(
  spec: { type: string; suspend?: boolean | undefined },
  list: BackendList = BACKENDS,
): string | undefined {
  if (!descriptorFor(spec.type, list)?.create) return `no adapter for type ${spec.type} in this build yet`;
  if (spec.suspend) return 'suspended';
  return undefined;
}

/**
 * What the solver knows of a Backend spec before any adapter answers: its traits and whether it
 * can take new work. The controller and `adv plan` both build it here, so they decide alike.
 */
export function backendInfoOf(
  name: string,
  spec: BackendObject['spec'],
  list: BackendList = BACKENDS,
  why = unusableBecause(spec, list),
): BackendInfo {
  const traits = descriptorFor(spec.type, list)?.traits ?? ONE_HOST_TRAITS;
  return { name, spec, traits, usable: !why, ...(why ? { why } : {}) };
}
