/**
 * What this host offers, detected by `adv agent` at each start (a GPU swapped, a driver or torch
 * upgraded): cores, memory, each GPU's name and memory and the CUDA version the driver supports
 * (`nvidia-smi`), OS, Node, Python and torch. A probe that fails leaves its field out: a host
 * without `nvidia-smi` has no GPUs and no CUDA, and is never offered a run that needs them.
 */
import { execFile } from 'node:child_process';
import { availableParallelism, hostname, platform, release, totalmem } from 'node:os';
import { NVIDIA_SMI_QUERY, parseNvidiaSmi } from '../nvidia-smi.js';
import type { AgentCapabilities } from './protocol.js';

/** Runs a probe: its stdout, or undefined when it is missing, fails or hangs. */
function probe(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  timeoutMs = 20_000,
): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env, timeout: timeoutMs, maxBuffer: 1 << 20 }, (err, stdout) =>
      resolve(err ? undefined : String(stdout)),
    );
  });
}

const round1 = (x: number) => Math.round(x * 10) / 10;

export async function detectCapabilities(env: NodeJS.ProcessEnv = process.env): Promise<AgentCapabilities> {
  const [gpuList, banner, python, torch] = await Promise.all([
    probe('nvidia-smi', [...NVIDIA_SMI_QUERY], env),
    probe('nvidia-smi', [], env),
    probe('python3', ['--version'], env),
    probe('python3', ['-c', 'import torch; print(torch.__version__)'], env),
  ]);
  const gpus = gpuList
    ? parseNvidiaSmi(gpuList).map((g) => ({ name: g.name, vramGiB: round1(g.memoryTotalMiB / 1024) }))
    : [];
  const cuda = banner && /CUDA Version:\s*([0-9.]+)/.exec(banner)?.[1];
  const py = python && /Python\s+(\S+)/.exec(python)?.[1];
  return {
    hostname: hostname(),
    cores: availableParallelism(),
    ramGiB: round1(totalmem() / 2 ** 30),
    os: `${platform()} ${release()}`,
    node: process.version,
    ...(py ? { python: py } : {}),
    ...(torch?.trim() ? { torch: torch.trim() } : {}),
    ...(cuda ? { cuda } : {}),
    gpus,
  };
}
