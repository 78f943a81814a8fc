/**
 * Cloud TPU accelerator types (`v4-16`, `v5litepod-8`, `v6e-256`) read as slices: generation,
 * chips, hosts. The number in a name counts TensorCores on v2, v3, v4 and v5p (two per chip:
 * `v4-16` is 8 chips) and chips on v5e (`v5litepod-N`) and v6e (`v6e-N`). A host holds 4 chips,
 * except that v5e and v6e slices of up to 8 chips are one host (`v5litepod-8`: 8 chips, 1 host).
 */

/** A TPU slice, as an accelerator type names it. */
export interface TpuSlice {
  /** The accelerator type, lower-cased (`v5litepod-8`). */
  type: string;
  /** `v2`, `v3`, `v4`, `v5e` (`v5litepod`), `v5p`, `v6e`, or the name itself when it is not known here. */
  generation: string;
  /** Chips in the slice; undefined when the naming is not known here. */
  chips?: number;
  /** Chips on each host (each TPU VM). */
  chipsPerHost?: number;
  /** Hosts (TPU VMs) in the slice: every one runs the job. */
  hosts?: number;
}

/** TensorCores per chip, by generation: what the number in the type's name counts. */
const CORES_PER_CHIP: Readonly<Record<string, number>> = { v2: 2, v3: 2, v4: 2, v5p: 2, v5e: 1, v6e: 1 };
/** Generations whose slices of up to 8 chips are one host. */
const ONE_HOST_UP_TO_8 = new Set(['v5e', 'v6e']);
const ALIASES: Readonly<Record<string, string>> = { v5litepod: 'v5e', v5lite: 'v5e' };

/**
 * The slice an accelerator type names. `chipsPerHost` overrides the generation's (the Backend's
 * `gcpTpu.chips`). A name not of the `<generation>-<n>` form, or of a generation not known here,
 * keeps only its name: it then matches only itself.
 */
export function parseTpuType(name: string, chipsPerHost?: number): TpuSlice {
  const type = name.trim().toLowerCase();
  const m = /^([a-z][a-z0-9]*)-([0-9]+)$/.exec(type);
  if (!m) return { type, generation: type };
  const generation = ALIASES[m[1]!] ?? m[1]!;
  const perChip = CORES_PER_CHIP[generation];
  const n = Number(m[2]);
  if (!perChip || n < perChip || n % perChip) return { type, generation };
  const chips = n / perChip;
  const perHost =
    chipsPerHost ?? (ONE_HOST_UP_TO_8.has(generation) && chips <= 8 ? chips : Math.min(4, chips));
  return { type, generation, chips, chipsPerHost: perHost, hosts: Math.ceil(chips / perHost) };
}

/** `v4-32 (TPU v4, 16 chips)` */
export const describeTpuSlice = (s: TpuSlice): string =>
  `${s.type} (TPU ${s.generation}${s.chips !== undefined ? `, ${s.chips} chips` : ''})`;

/**
 * Why a slice is not the one asked for, or undefined when it is: the same generation (a program
 * compiled for one TPU generation does not run on another) and the same number of chips (the
 * slice's chips are the job's devices: its mesh is shaped for them).
 */
export function tpuSliceMismatch(want: TpuSlice, have: TpuSlice): string | undefined {
  const same =
    want.generation === have.generation &&
    (want.chips !== undefined && have.chips !== undefined
      ? want.chips === have.chips
      : want.type === have.type);
  return same ? undefined : `has ${describeTpuSlice(have)}, run needs ${describeTpuSlice(want)}`;
}
