/** Process identity on Linux: a pid plus its start time, so a recycled pid is never mistaken for ours. */
import { readFileSync } from 'node:fs';

/** Start time of a process in clock ticks since boot (field 22 of /proc/PID/stat), or undefined. */
export function processStartTicks(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const state = rest[0];
    if (state === 'Z' || state === 'X') return undefined; // a zombie has finished
    return Number(rest[19]);
  } catch {
    return undefined;
  }
}

/** Whether the process `pid` exists and is the one that started at `startTicks`. */
export function isSameProcessAlive(pid: number, startTicks: number | undefined): boolean {
  const now = processStartTicks(pid);
  return now !== undefined && (startTicks === undefined || now === startTicks);
}
