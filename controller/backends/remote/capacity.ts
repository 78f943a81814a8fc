/** GPUs of a host, by `nvidia-smi` over a transport: what `ssh` (and the worker hosts of cloud adapters) report. */
import type { Capacity } from '../types.js';
import type { RemoteTransport } from './host.js';
import { NVIDIA_SMI_QUERY, parseNvidiaSmi } from '../../../runtime/nvidia-smi.js';

// The parser is the worker side's (the agent reads its own host with it); re-exported for the adapters.
export { parseNvidiaSmi };

/**
 * GPUs of the host from `nvidia-smi`: a GPU with 100 MiB or more in use is busy (another
 * process is on it). A host without nvidia-smi reports no GPUs and says why.
 */
export async function hostGpuCapacity(transport: RemoteTransport): Promise<Capacity> {
  const r = await transport.exec(['nvidia-smi', ...NVIDIA_SMI_QUERY]);
  if (r.code !== 0)
    return {
      freeGpus: 0,
      gpus: [],
      note: `nvidia-smi is not available on ${transport.where} (${r.stderr.trim() || `exit ${r.code}`})`,
    };
  const gpus = parseNvidiaSmi(r.stdout.toString());
  return { freeGpus: gpus.filter((g) => !g.busy).length, gpus };
}
