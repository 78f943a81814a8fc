/** GPUs of a host, by `nvidia-smi` over a transport: what `ssh` (and the worker hosts of cloud adapters) report. */
import type { Capacity } from '../types.js';
import type { RemoteTransport } from './host.js';

/** `0, NVIDIA H100 80GB HBM3, 81559, 4` lines → GPUs; busy at ≥ 100 MiB used. */
export function parseNvidiaSmi(text: string): NonNullable<Capacity['gpus']> {
  return text
    .split('\n')
    .map((l) => l.split(',').map((x) => x.trim()))
    .filter((f) => f.length >= 4 && /^\d+$/.test(f[0]!))
    .map(([index, name, total, used]) => ({
      index: Number(index),
      name: name!,
      memoryTotalMiB: Number(total),
      memoryUsedMiB: Number(used),
      busy: Number(used) >= 100,
    }));
}

/**
 * GPUs of the host from `nvidia-smi`: a GPU with 100 MiB or more in use is busy (another
 * process is on it). A host without nvidia-smi reports no GPUs and says why.
 */
export async function hostGpuCapacity(transport: RemoteTransport): Promise<Capacity> {
  const r = await transport.exec([
    'nvidia-smi',
    '--query-gpu=index,name,memory.total,memory.used',
    '--format=csv,noheader,nounits',
  ]);
  if (r.code !== 0)
    return {
      freeGpus: 0,
      gpus: [],
      note: `nvidia-smi is not available on ${transport.where} (${r.stderr.trim() || `exit ${r.code}`})`,
    };
  const gpus = parseNvidiaSmi(r.stdout.toString());
  return { freeGpus: gpus.filter((g) => !g.busy).length, gpus };
}
