/**
 * Vast.ai offer searches as data: the query a run's needs turn into (`offerQuery`, pure), the GPU
 * names Vast uses for the types a spec names (`vastGpuNames`), and the wire form `POST
 * /api/v0/bundles/` takes (`offerQueryBody`).
 *
 * The wire form, as the official CLI (vast-ai/vast-cli `vastai/api/offers.py`, `query.py`) and the
 * API reference (docs.vast.ai `search_offers.yaml`) give it: one JSON object whose keys are offer
 * fields, each `{op: value}` with op one of `eq neq gt gte lt lte in notin`, next to the non-filter
 * keys `order` (`[["dph_total","asc"]]`), `type` (`on-demand | bid | reserved`), `limit` and
 * `allocated_storage` (GB, which prices the disk into `dph_total`). Memory fields (`gpu_ram`,
 * `cpu_ram`, `gpu_total_ram`) are in MB: the CLI multiplies the GB a user types by 1000, and this
 * builder does the same (see `minVramGiB`). The CLI turns `_` in a value into a space
 * (`RTX_4090` → `RTX 4090`); the API compares the spaced name, so names are sent spaced.
 */

/** A comparison the offer search knows. */
export type FilterOp = 'eq' | 'neq' | 'gt' | 'gte' | 'lt' | 'lte' | 'in' | 'notin';
export type FilterValue = string | number | boolean | null | readonly (string | number)[];
/** One field's conditions, all of which must hold: `{gte: 0.98}`, `{in: ["H100 SXM"]}`. */
export type FieldFilter = Partial<Record<FilterOp, FilterValue>>;

/** `on-demand` rents at the listed price; `bid` is interruptible (paused when outbid). */
export type OfferType = 'on-demand' | 'bid' | 'reserved';

/** An offer search, structured; `offerQueryBody` is what goes on the wire. */
export interface OfferQuery {
  /** Offer field → conditions (`gpu_ram` and `cpu_ram` in MB). */
  filters: Record<string, FieldFilter>;
  /** Sort keys in order; the API's default is `score` descending. */
  order?: [field: string, dir: 'asc' | 'desc'][];
  type?: OfferType;
  limit?: number;
  /** The disk (GB) the rental will ask for: Vast prices it into each offer's `dph_total`. */
  allocatedStorage?: number;
}

/** The JSON body of `POST /api/v0/bundles/` for a query. */
export function offerQueryBody(q: OfferQuery): Record<string, unknown> {
  return {
    ...q.filters,
    ...(q.order ? { order: q.order } : {}),
    type: q.type ?? 'on-demand',
    ...(q.limit !== undefined ? { limit: q.limit } : {}),
    ...(q.allocatedStorage !== undefined ? { allocated_storage: q.allocatedStorage } : {}),
  };
}

/**
 * Spec GPU types → the `gpu_name` values Vast lists for them (vast-cli `vastai/data/query.py`, "GPU
 * name constants", taken from Vast's own gpulist). A family name covers its form factors (H100 is
 * SXM, PCIe and NVL); it does not reach into other models (L40 is not L40S, RTX 4090 is not the
 * cut-down RTX 4090D). Keys are compared upper-cased with everything but letters and digits removed,
 * so `rtx-4090`, `RTX_4090` and `4090` are one key.
 */
export const VAST_GPU_NAMES: Readonly<Record<string, readonly string[]>> = {
  B200: ['B200'],
  GH200: ['GH200 SXM'],
  H200: ['H200', 'H200 NVL'],
  H100: ['H100 SXM', 'H100 PCIE', 'H100 NVL'],
  A100: ['A100 SXM4', 'A100 PCIE', 'A100X', 'A100 SXM'],
  A800: ['A800 PCIE'],
  L40S: ['L40S'],
  L40: ['L40'],
  L4: ['L4'],
  A40: ['A40'],
  A30: ['A30'],
  A10: ['A10'],
  A10G: ['A10g'],
  A6000: ['RTX A6000'],
  RTXA6000: ['RTX A6000'],
  A5000: ['RTX A5000'],
  RTXA5000: ['RTX A5000'],
  A4000: ['RTX A4000'],
  RTXA4000: ['RTX A4000'],
  RTX6000ADA: ['RTX 6000Ada'],
  '6000ADA': ['RTX 6000Ada'],
  RTX5090: ['RTX 5090'],
  '5090': ['RTX 5090'],
  RTX4090: ['RTX 4090'],
  '4090': ['RTX 4090'],
  RTX4080: ['RTX 4080'],
  '4080': ['RTX 4080'],
  RTX3090: ['RTX 3090'],
  '3090': ['RTX 3090'],
  V100: ['Tesla V100'],
  T4: ['Tesla T4'],
};

const gpuKey = (name: string) => name.toUpperCase().replace(/[^A-Z0-9]/g, '');

/**
 * The Vast `gpu_name` values for one GPU type. A name the table does not know passes through as
 * Vast spells it (underscores become spaces, as the CLI does), so a Backend may name any Vast GPU
 * exactly (`RTX_3060`, `RTX PRO 6000`).
 */
export function vastGpuNames(type: string): string[] {
  const known = VAST_GPU_NAMES[gpuKey(type)];
  return known ? [...known] : [type.trim().replace(/_/g, ' ')];
}

/**
 * A spec's `gpuType` (`H100|A100|any`) as Vast names, one list per alternative in order of
 * preference; undefined when any GPU will do (no type, or `any` among them). One search sorts by
 * price, not preference: an adapter that honours the order searches once per alternative.
 */
export function gpuTypeAlternatives(gpuType: string | readonly string[] | undefined): string[][] | undefined {
  if (gpuType === undefined) return undefined;
  const alts = (typeof gpuType === 'string' ? gpuType.split('|') : [...gpuType])
    .map((a) => a.trim())
    .filter(Boolean);
  if (!alts.length || alts.some((a) => a.toLowerCase() === 'any')) return undefined;
  return alts.map(vastGpuNames);
}

/** What a run needs from one Vast machine (one node). */
export interface OfferNeeds {
  /** GPUs on the machine (`num_gpus` equal); 0 or absent leaves the count open. */
  gpus?: number;
  /** `H100|A100`, or a list of types; `any` (or nothing) accepts every GPU. */
  gpuType?: string | readonly string[];
  /** Memory per GPU; sent as `gpu_ram gte` in MB, GiB × 1000 like the CLI (see below). */
  minVramGiB?: number;
  /** Host memory; `cpu_ram gte`, GiB × 1000. */
  minRamGiB?: number;
  /** Offer reliability floor (0–1). Default 0.98. */
  minReliability?: number;
  /** Disk for the rental (GB): offers with at least this much, priced with it. */
  diskGB?: number;
  /** Highest CUDA version the driver must support at least (`cuda_max_good gte`), e.g. 12.1. */
  minCuda?: number;
  /** Price cap per machine-hour (`dph_total lte`; for `bid`, the search prices at the minimum bid). */
  maxDollarsPerHour?: number;
  /** Only machines Vast has verified. Default true. */
  verifiedOnly?: boolean;
  /** Interruptible (a `bid` search) instead of on-demand. */
  interruptible?: boolean;
  /** Offers to return. Default 16. */
  limit?: number;
}

export const DEFAULT_MIN_RELIABILITY = 0.98;
export const DEFAULT_OFFER_LIMIT = 16;

/**
 * The search for machines that meet `needs`, cheapest first. Always rentable and not rented, never
 * external (the CLI's defaults, which a query body replaces rather than extends).
 *
 * Memory floors are GiB × 1000 MB, not × 1024: Vast reports what the driver reports (an RTX 4090's
 * "24 GB" is 24564 MiB, an H100 80GB 81559), so a × 1024 floor would drop the very cards a user
 * means by "24" or "80"; × 1000 is the CLI's own reading of `gpu_ram>=24`.
 */
export function offerQuery(needs: OfferNeeds): OfferQuery {
  const filters: Record<string, FieldFilter> = {
    rentable: { eq: true },
    rented: { eq: false },
    external: { eq: false },
  };
  if (needs.verifiedOnly ?? true) filters.verified = { eq: true };
  if (needs.gpus) filters.num_gpus = { eq: needs.gpus };
  const alts = gpuTypeAlternatives(needs.gpuType);
  if (alts) filters.gpu_name = { in: [...new Set(alts.flat())] };
  if (needs.minVramGiB) filters.gpu_ram = { gte: Math.floor(needs.minVramGiB * 1000) };
  if (needs.minRamGiB) filters.cpu_ram = { gte: Math.floor(needs.minRamGiB * 1000) };
  filters.reliability = { gte: needs.minReliability ?? DEFAULT_MIN_RELIABILITY };
  if (needs.diskGB) filters.disk_space = { gte: needs.diskGB };
  if (needs.minCuda !== undefined) filters.cuda_max_good = { gte: needs.minCuda };
  if (needs.maxDollarsPerHour !== undefined) filters.dph_total = { lte: needs.maxDollarsPerHour };
  return {
    filters,
    order: [['dph_total', 'asc']],
    type: needs.interruptible ? 'bid' : 'on-demand',
    limit: needs.limit ?? DEFAULT_OFFER_LIMIT,
    ...(needs.diskGB ? { allocatedStorage: needs.diskGB } : {}),
  };
}
