/**
 * `volcano`: a lab's Kubernetes cluster with the Volcano batch scheduler, through the user's
 * `kubectl` and kubeconfig (auth plugins and all). One Volcano Job per attempt, gang-scheduled
 * (`minAvailable` = replicas = nodes), the attempt story mapped from Volcano's phases and pod
 * evictions. See `adapter.ts`.
 */
import { declaredGpuTypes, type AdapterDescriptor } from '../types.js';
import { VOLCANO_TRAITS } from './render.js';
import { volcanoSettings } from './settings.js';

export { volcanoSettings };

/**
 * Node labels that name a GPU model: `nvidia.com/gpu.product` (GPU feature discovery),
 * `cloud.google.com/gke-accelerator`, `k8s.amazonaws.com/accelerator`, `…/instance-gpu-name`.
 */
const GPU_LABEL = /(gpu[._-]?(product|type|name|model)|accelerator)$/i;

/** The GPU types the pods can get: `capabilities.gpuTypes` and what the node selector pins. */
function volcanoGpuTypes(spec: Parameters<typeof declaredGpuTypes>[0]): string[] {
  const selected = Object.entries(spec.volcano?.nodeSelector ?? {}).filter(([k]) => GPU_LABEL.test(k));
  return [...declaredGpuTypes(spec), ...selected.map(([, v]) => v)];
}

/** `volcano`: a gang scheduler, so it queues jobs until they fit and a job may span pods. */
export const volcanoBackend: AdapterDescriptor<'volcano', typeof volcanoSettings> = {
  type: 'volcano',
  settings: volcanoSettings,
  needsConnection: false,
  traits: { ...VOLCANO_TRAITS, gpuTypes: volcanoGpuTypes },
  // Loaded when a Backend of this type is started, never by validating YAML (test/import-graph.test.ts).
  async create(spec, ctx) {
    const { VolcanoBackend } = await import('./adapter.js');
    return new VolcanoBackend(spec.metadata.name, spec.spec, ctx);
  },
};
