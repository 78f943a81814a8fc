/** Backend adapters, registered in a list: a new backend touches its folder and one line here. */
import type { BackendFactory } from './types.js';
import { localBackend } from './local/index.js';
import { slurmBackend } from './slurm/index.js';
import { sshBackend } from './ssh/index.js';

export const BACKEND_FACTORIES: readonly BackendFactory[] = [localBackend, sshBackend, slurmBackend];

export function factoryFor(type: string): BackendFactory | undefined {
  return BACKEND_FACTORIES.find((f) => f.type === type);
}

/** Why a Backend spec cannot take new work with these adapters, or undefined when it can. */
export function unusableBecause(
  spec: { type: string; suspend?: boolean | undefined },
  factories: readonly BackendFactory[] = BACKEND_FACTORIES,
): string | undefined {
  if (!factories.some((f) => f.type === spec.type))
    return `no adapter for type ${spec.type} in this build yet`;
  if (spec.suspend) return 'suspended';
  return undefined;
}
