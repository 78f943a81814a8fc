/** GPUs as `nvidia-smi` lists them: read by the agent on its own host and by the controller over SSH. */

/** One GPU of a host, and whether a process already uses it. */
export interface HostGpu {
  index: number;
  name: string;
  memoryTotalMiB: number;
  memoryUsedMiB: number;
  busy: boolean;
}

/** The `nvidia-smi` arguments whose output `parseNvidiaSmi` reads. */
export const NVIDIA_SMI_QUERY: readonly string[] = [
  '--query-gpu=index,name,memory.total,memory.used',
  '--format=csv,noheader,nounits',
];

/** `0, NVIDIA H100 80GB HBM3, 81559, 4` lines → GPUs; busy at ≥ 100 MiB used. */
export function parseNvidiaSmi(text: string): HostGpu[] {
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
