/**
 * A fake of the Vast.ai REST API (https://console.vast.ai) on loopback, for the vastai backend's
 * client to drive with the requests it sends Vast. Sources, in order of authority: the API reference
 * (github.com/vast-ai/docs `api-reference/openapi/yaml/*.yaml`, docs.vast.ai "Rate Limits and
 * Errors", checked 2026-08), the official CLI/SDK (vast-ai/vast-cli `vastai/api/*.py`), and
 * shared/research/backends.md §(c). [U] marks what none of them settles: the fake picks something
 * plausible and says so.
 *
 * What it reproduces:
 * - Auth: `Authorization: Bearer <key>` (or the `api_key` query parameter the API also takes);
 *   anything else → 401 `{"success":false,"error":"auth_error","msg":"Invalid user key"}` (the
 *   reference's example; the same answer for a missing key is [U]).
 * - `POST /api/v0/bundles/` — offer search. The body's keys are offer fields, each
 *   `{op: value}` with op `eq neq gt gte lt lte in notin` (a value `"any"` drops the condition, as
 *   the CLI does before sending), beside `order` (`[["dph_total","asc"]]`; default `score` desc),
 *   `type` (`on-demand`/`ondemand`, `bid`, `reserved`), `limit`, `allocated_storage`. `gpu_ram`,
 *   `cpu_ram` are MB; aliases `dph` → `dph_total`, `reliability2` → `reliability`, `cuda_vers` →
 *   `cuda_max_good`. A `bid` search prices each offer at its `min_bid` (`dph_total`, `is_bid`).
 *   Answers `{"offers":[…]}`, at most `searchCap` (64: a third-party client's observation, [U]).
 *   Unknown fields and operators are 400 `invalid_args` ([U]: the real API may ignore them; the
 *   fake is strict so a client typo shows).
 * - `PUT /api/v0/asks/{offer}/` — rent: `{"success":true,"new_contract":<id>}`. The body is checked
 *   as the reference's `x-input-validation` says (image required, label ≤ 256, disk ≥ 8, env values
 *   ≤ 256 and ≤ 32768 in all, onstart+args ≤ 4096, price 0.001–128) → 400 `invalid_args`; a bid
 *   below the offer's `min_bid` → 400 `invalid_price` ([U]). An offer that is rented (or whose
 *   machine has no ssh endpoint left) → 410 `{"success":false,"error":"no_such_ask","msg":"error
 *   410/3907: no_such_ask Instance type N is no longer available.","ask_id":N}`; an id never
 *   offered → 404 `error: "invalid_args"`, `msg: "error 404/3603: no_such_ask …"` (both from the
 *   reference; `takenStatus: 404` makes a taken offer answer the 404 form — third parties saw 400,
 *   404 and 410). Renting takes the offer out of searches until the instance is destroyed;
 *   `takeAfterNextSearch(n)` has another account rent the first n offers a search answered, so
 *   the rent that follows meets `no_such_ask`.
 * - `GET /api/v0/instances/{id}/?owner=me` → `{"instances":{…}}`, `{"instances":null}` once gone.
 * - `GET /api/v0/instances/` (the old list) → `{"success":false,"error":"deprecated_endpoint",…}`
 *   as Vast has answered since 2026-08-20 (SkyPilot #10517; HTTP 200 is [U]).
 * - `GET /api/v1/instances/?select_filters=&order_by=&limit=&after_token=` → `{"success":true,
 *   "instances_found","total_instances","label_counts","next_token","instances":[…]}`: keyset
 *   pages of at most 25 (`limit` ≤ 0 → 5), `next_token` an opaque base64 of the last row's sort
 *   values (a bad one → 400 `invalid_token`), `id` appended as the tiebreaker; filters on stored
 *   columns only (`id label actual_status intended_status cur_state gpu_name verification
 *   machine_id host_id image_uuid`; others, e.g. `dph_total`, → 400 `invalid_request`).
 * - `DELETE /api/v0/instances/{id}/` → `{"success":true,"msg":"Instance destroyed successfully"}`;
 *   a missing one → 404 `{"success":false,"error":"not_found","msg":"Instance not found"}`.
 * - `PUT /api/v0/instances/{id}/` with `{"state":"stopped"|"running"}` or `{"label":L}` →
 *   `{"success":true}`; missing → 404 `no_such_instance`; a label over 1024 → 400 `label_too_long`.
 * - `PUT /api/v0/instances/bid_price/{id}/` `{"client_id":"me","price":X}`, and the two-step log:
 *   `PUT /api/v0/instances/request_logs/{id}/` → `{"success":true,"result_url":U}`, `GET U` 404
 *   until ready (`logReadyReads`), then the text (`setLogs`).
 * - Instances carry the reference's fields (`id machine_id actual_status intended_status cur_state
 *   status_msg label ssh_host ssh_port public_ipaddr ports dph_total gpu_name num_gpus start_date
 *   is_bid min_bid extra_env image_uuid disk_space reliability2 …`); `extra_env` is a list of
 *   `[name, value]` pairs; `ports` (`{"22/tcp":[{"HostIp":"0.0.0.0","HostPort":"…"}]}`) only while
 *   running, as the reference says; `ssh_host`/`ssh_port` from `loading` on ([U] when Vast fills them).
 * - Lifecycle: `actual_status` null → `loading` → `running`, each step after the instance has been
 *   read `provisionReads`/`loadingReads` times (a show, or a list page holding it) or
 *   `provisionMs`/`loadingMs` after it began, whichever comes first; `stuck` holds it in
 *   `loading`. `outbid(id)` pauses a bid instance (`actual_status` `stopped`, `intended_status` still
 *   `running`: the research's guess, [U]) until `resume(id)`; `exit(id)` → `exited`, `offline(id)` →
 *   `offline`; a PUT `stopped` halts it. Each of these, and a destroy, calls `onStop` first, so the
 *   test kills the workload's processes as the machine would.
 * - SSH: each rental takes one of `sshEndpoints` (real sshd listeners) and frees it when destroyed:
 *   `ssh_host:ssh_port` is the endpoint, and `public_ipaddr` + `ports["22/tcp"]` its `direct`
 *   address when given (Vast's gateway and the machine differ; SkyPilot uses the first, the CLI the
 *   second), else the endpoint again. No endpoint left = nothing rentable (searches come back empty).
 * - Faults: `failNext(n, kind)` answers the next n requests (matching `method`/`path` if given) with
 *   a 429 (Vast's plain-text `API requests too frequent: endpoint threshold=…`, or the reference's
 *   JSON `{"detail": …}`; no `Retry-After` unless asked, as Vast sends none), a 5xx (HTML, as a
 *   gateway's), a 200 HTML page, a 200 `deprecated_endpoint`, or a dropped connection; `applied`
 *   lets the request take effect before the answer is lost. `down()` closes the port (connections
 *   refused) until `up()` or the given time.
 * - A billing ledger (every rental, its price, rented/destroyed times) and every request recorded
 *   (the key never: `auth` says only how it came).
 *
 * What it does not: real rate limiting (only injected 429s), prices that move, storage added into
 * `dph_total` for `allocated_storage`, several offers per machine (renting one GPU of eight), the
 * bulk endpoints (`/asks/bulk/`, `DELETE /instances/` with ids), templates, volumes, `reserved`
 * pricing, `frozen`/`rebooting`/`unknown`, a host that takes a stopped instance's GPU (a start is
 * always granted), billing by the second (the ledger has times; nothing is charged), redirects of
 * paths without their trailing `/` (404 here, [U] there), and the real status messages ([U]).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A real sshd listener an instance's ssh fields point at. */
export interface SshEndpoint {
  host: string;
  port: number;
  /** The machine's own address (`public_ipaddr` and `ports["22/tcp"]`); default the endpoint itself. */
  direct?: { host: string; port: number };
}

export type StopReason = 'outbid' | 'exited' | 'offline' | 'stopped' | 'destroyed';

export interface FakeVastApiOptions {
  /** The one valid key. Default a random one (read it from `apiKey`). */
  apiKey?: string;
  /** One per running instance, in order; none left = no offer rentable. Default none. */
  sshEndpoints?: SshEndpoint[];
  /** Reads that see `actual_status: null` before `loading`. Default 1. */
  provisionReads?: number;
  /** Reads that see `loading` before `running`. Default 1. */
  loadingReads?: number;
  /** Or step this long after the rental (or the start of loading), read or not. */
  provisionMs?: number;
  loadingMs?: number;
  /** New instances never leave `loading`. */
  stuck?: boolean;
  /** The status a taken offer answers: 410 (default) or 404 (the reference's two forms). */
  takenStatus?: 404 | 410;
  /** Most offers one search returns, whatever `limit` says. Default 64. */
  searchCap?: number;
  /** Reads of a log's result URL that 404 before it is there. Default 1. */
  logReadyReads?: number;
  /** Called before an instance stops running for `why`: kill its workload here. */
  onStop?: (inst: FakeInstance, why: StopReason) => unknown;
}

/** An offer: the API's fields (only these are searchable), plus whatever a test seeds. */
export interface FakeOffer {
  id: number;
  ask_contract_id: number;
  bundle_id: number;
  machine_id: number;
  host_id: number;
  gpu_name: string;
  num_gpus: number;
  /** MB per GPU. */
  gpu_ram: number;
  gpu_total_ram: number;
  gpu_arch: string;
  compute_cap: number;
  cpu_ram: number;
  cpu_cores: number;
  cpu_cores_effective: number;
  cpu_arch: string;
  dph_base: number;
  dph_total: number;
  min_bid: number;
  storage_cost: number;
  reliability: number;
  reliability_mult: number;
  disk_space: number;
  disk_bw: number;
  cuda_max_good: number;
  driver_version: string;
  driver_vers: number;
  geolocation: string;
  verification: string;
  verified: boolean;
  inet_down: number;
  inet_up: number;
  rentable: boolean;
  rented: boolean;
  external: boolean;
  is_bid: boolean;
  hosting_type: number;
  datacenter: boolean;
  static_ip: boolean;
  public_ipaddr: string;
  direct_port_count: number;
  pci_gen: number;
  os_version: string;
  score: number;
  dlperf: number;
  start_date: number;
  end_date: number;
  duration: number;
  [field: string]: unknown;
}

/** An instance as the fake holds it now. */
export interface FakeInstance {
  readonly id: number;
  readonly offerId: number;
  readonly label: string | null;
  readonly actualStatus: string | null;
  readonly intendedStatus: string;
  readonly isBid: boolean;
  /** $/hour it bills at (the bid for a bid instance). */
  readonly price: number;
  readonly endpoint: SshEndpoint;
  /** The rental's body as sent. */
  readonly request: Record<string, unknown>;
  /** What the API returns for it now (reading it here counts as no read). */
  readonly resource: Record<string, unknown>;
}

/** One rental, from `PUT /asks/` (or `seedInstance`) to its destroy. */
export interface Rental {
  instanceId: number;
  offerId: number;
  label: string | null;
  /** $/hour. */
  price: number;
  isBid: boolean;
  /** Epoch ms. */
  rentedAt: number;
  destroyedAt?: number;
}

export interface RecordedRequest {
  method: string;
  /** The path without the query. */
  path: string;
  /** The query, `api_key` shown as `[redacted]`. */
  query: Record<string, string>;
  body?: unknown;
  /** The HTTP status answered; 0 for a dropped connection. */
  status: number;
  /** How the key came: header, query parameter, wrong, or not at all. */
  auth: 'bearer' | 'query' | 'wrong' | 'missing';
  /** The fault injected instead of the API's answer, if any. */
  fault?: FaultKind;
}

export type FaultKind = '429' | '500' | 'garbage-html' | 'deprecated' | 'drop';

export interface FaultOptions {
  /** Only requests with this method. */
  method?: string;
  /** Only requests whose path matches. */
  path?: string | RegExp;
  /** 429: a `Retry-After` header (seconds, or an HTTP date). Vast sends none. */
  retryAfter?: number | string;
  /** 429: the endpoint threshold the message names, seconds. Default 1. */
  threshold?: number;
  /** 429: the body as plain text (default, what Vast mostly sends) or the reference's JSON. */
  body?: 'text' | 'json';
  /** '500': the status, 500–504. Default 500. */
  status?: number;
  /** '500', 'drop': the request takes effect first, then its answer is lost. */
  applied?: boolean;
}

export interface FakeVastApi {
  /** The client's `apiUrl` (no trailing slash). */
  readonly url: string;
  readonly apiKey: string;
  readonly requests: RecordedRequest[];
  /** Every rental ever made, in order. */
  readonly ledger: readonly Rental[];
  /** Settings that may change between calls (they apply to instances rented afterwards). */
  readonly options: Required<Pick<FakeVastApiOptions, 'provisionReads' | 'loadingReads' | 'stuck'>> &
    Pick<FakeVastApiOptions, 'provisionMs' | 'loadingMs'>;
  /** An offer on a new machine, with sensible defaults for what `partial` leaves out. */
  seedOffer(partial?: Partial<FakeOffer>): FakeOffer;
  /** Offers not rented now. */
  offers(): FakeOffer[];
  /** Takes every offer not rented now off the market (a test starts from an empty one). */
  withdrawOffers(): void;
  instances(): FakeInstance[];
  instance(id: number): FakeInstance | undefined;
  /** An instance already there and running, without a request (a leftover): rents a new offer. */
  seedInstance(
    body: { label: string; image?: string; price?: number },
    offer?: Partial<FakeOffer>,
  ): FakeInstance;
  /** Hold the instance in `loading` (or let it go on). */
  stuck(id: number, on?: boolean): void;
  /** The first `n` offers the next search answers are rented by another account right after it. */
  takeAfterNextSearch(n?: number): void;
  /** A bid instance outbid: paused (`stopped` while intended `running`) after `onStop`. */
  outbid(id: number): Promise<void>;
  /** An outbid instance gets its GPU back: `loading`, then `running`. */
  resume(id: number): void;
  /** The container exits unexpectedly (`exited`), after `onStop`. */
  exit(id: number): Promise<void>;
  /** The host disconnects (`offline`), after `onStop`. */
  offline(id: number): Promise<void>;
  /** The text a log request returns for the instance. */
  setLogs(id: number, text: string): void;
  /** Answers the next `n` (matching) requests with `kind` instead. */
  failNext(n: number, kind: FaultKind, opts?: FaultOptions): void;
  /** Closes the port: connections are refused until `up()`, or for `ms` if given. */
  down(ms?: number): Promise<void>;
  up(): Promise<void>;
  /** Rentals not destroyed: what would still be billing. */
  billing(): Rental[];
  stop(): Promise<void>;
}

interface Pending {
  to: 'loading' | 'running';
  readsLeft: number;
  dueAt: number;
}

interface Held {
  id: number;
  offer: FakeOffer;
  request: Record<string, unknown>;
  label: string | null;
  actual: string | null;
  intended: 'running' | 'stopped';
  cur: string;
  statusMsg: string | null;
  pending?: Pending;
  stuck: boolean;
  endpoint: SshEndpoint;
  sshIdx: number;
  isBid: boolean;
  price: number;
  disk: number;
  env: [string, string][];
  startDate: number;
  rental: Rental;
  logs: string;
}

interface Fault extends FaultOptions {
  kind: FaultKind;
  left: number;
}

type Reply =
  { status: number; json: unknown } | { status: number; text: string; type: string; headers?: object };

/** Offer fields a search may name (vast-cli `offers_fields`, and the reference's search schema). */
const OFFER_FIELDS = new Set([
  'bw_nvlink', 'compute_cap', 'cpu_arch', 'cpu_cores', 'cpu_cores_effective', 'cpu_ghz', 'cpu_ram',
  'cuda_max_good', 'datacenter', 'direct_port_count', 'driver_version', 'driver_vers', 'disk_bw',
  'disk_space', 'dlperf', 'dlperf_per_dphtotal', 'dph_total', 'duration', 'external',
  'flops_per_dphtotal', 'gpu_arch', 'gpu_display_active', 'gpu_frac', 'gpu_mem_bw', 'gpu_name',
  'gpu_ram', 'gpu_total_ram', 'gpu_max_power', 'gpu_max_temp', 'has_avx', 'host_id', 'hosting_type',
  'id', 'inet_down', 'inet_down_cost', 'inet_up', 'inet_up_cost', 'machine_id', 'min_bid', 'mobo_name',
  'num_gpus', 'os_version', 'pci_gen', 'pcie_bw', 'reliability', 'rentable', 'rented', 'storage_cost',
  'static_ip', 'total_flops', 'ubuntu_version', 'verification', 'verified', 'vms_enabled',
  'geolocation', 'cluster_id', 'score',
]); // prettier-ignore
const OFFER_ALIASES: Record<string, string> = {
  dph: 'dph_total',
  reliability2: 'reliability',
  cuda_vers: 'cuda_max_good',
  ubuntu_version: 'os_version',
};
const SEARCH_KEYS = new Set(['order', 'type', 'limit', 'allocated_storage', 'disable_bundling']);
const OPS = new Set(['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'in', 'notin']);
/** Columns stored on the contract row: the only ones the v1 list filters on. */
const LIST_FILTERABLE = new Set([
  'id', 'label', 'actual_status', 'intended_status', 'cur_state', 'gpu_name', 'verification',
  'machine_id', 'host_id', 'image_uuid',
]); // prettier-ignore
const LIST_ORDERABLE = new Set(['id', 'label', 'actual_status', 'start_date', 'machine_id']);
const RUNTYPES = new Set([
  'ssh', 'jupyter', 'args', 'ssh_proxy', 'ssh_direct', 'ssh_direc', 'jupyter_proxy', 'jupyter_direct',
  'jupyter_direc',
]); // prettier-ignore

const json = (status: number, body: unknown): Reply => ({ status, json: body });
const vastError = (status: number, error: string, msg: string, extra: object = {}): Reply =>
  json(status, { success: false, error, msg, ...extra });
const html = (status: number, title: string): Reply => ({
  status,
  type: 'text/html; charset=utf-8',
  text: `<!DOCTYPE html>\n<html><head><title>${title}</title></head><body><center><h1>${title}</h1></center><hr><center>nginx</center></body></html>\n`,
});
const GATEWAY_TITLES: Record<number, string> = {
  500: '500 Internal Server Error',
  502: '502 Bad Gateway',
  503: '503 Service Temporarily Unavailable',
  504: '504 Gateway Time-out',
};

/** Starts the fake on 127.0.0.1 (a free port). */
export async function startFakeVastApi(opts: FakeVastApiOptions = {}): Promise<FakeVastApi> {
  const apiKey = opts.apiKey ?? randomBytes(24).toString('hex');
  const options = {
    provisionReads: opts.provisionReads ?? 1,
    loadingReads: opts.loadingReads ?? 1,
    provisionMs: opts.provisionMs,
    loadingMs: opts.loadingMs,
    stuck: opts.stuck ?? false,
  };
  const freeEndpoints = [...(opts.sshEndpoints ?? [])];
  const offers: FakeOffer[] = [];
  const held: Held[] = [];
  const ledger: Rental[] = [];
  const requests: RecordedRequest[] = [];
  const faults: Fault[] = [];
  const logUrls = new Map<string, { instanceId: number; text: string; readsLeft: number }>();
  let nextOffer = 31_000_001;
  let nextMachine = 40_001;
  let nextInstance = 27_000_001;
  let sshIdx = 1;
  let url = '';

  /** Offers someone else rented (`takeAfterNextSearch`): gone for this account too. */
  const elsewhere = new Set<number>();
  let takeAfterSearch = 0;
  const taken = (o: FakeOffer) => elsewhere.has(o.id) || held.some((h) => h.offer.id === o.id);
  const find = (id: number) => held.find((h) => h.id === id);

  const seedOffer = (partial: Partial<FakeOffer> = {}): FakeOffer => {
    const id = partial.id ?? nextOffer++;
    const machine = partial.machine_id ?? nextMachine++;
    const numGpus = partial.num_gpus ?? 1;
    const gpuRam = partial.gpu_ram ?? 24564;
    const now = Date.now() / 1000;
    const o: FakeOffer = {
      id,
      ask_contract_id: id,
      bundle_id: id + 500_000_000,
      machine_id: machine,
      host_id: partial.host_id ?? 100_000 + (machine % 1000),
      gpu_name: 'RTX 4090',
      num_gpus: numGpus,
      gpu_ram: gpuRam,
      gpu_total_ram: gpuRam * numGpus,
      gpu_arch: 'nvidia',
      compute_cap: 890,
      cpu_ram: 64_000 * numGpus,
      cpu_cores: 32,
      cpu_cores_effective: 8 * numGpus,
      cpu_arch: 'amd64',
      dph_base: 0.35 * numGpus,
      dph_total: 0.4 * numGpus,
      min_bid: 0.2 * numGpus,
      storage_cost: 0.1,
      reliability: 0.995,
      reliability_mult: 0.99,
      disk_space: 500,
      disk_bw: 3000,
      cuda_max_good: 12.4,
      driver_version: '550.54.14',
      driver_vers: 550_054_014,
      geolocation: 'Oregon, US',
      verification: 'verified',
      verified: true,
      inet_down: 900,
      inet_up: 800,
      rentable: true,
      rented: false,
      external: false,
      is_bid: false,
      hosting_type: 0,
      datacenter: false,
      static_ip: true,
      public_ipaddr: `203.0.113.${machine % 250}`,
      direct_port_count: 20,
      pci_gen: 4,
      os_version: '22.04',
      score: 100,
      dlperf: 80,
      start_date: now - 86_400,
      end_date: now + 30 * 86_400,
      duration: 30 * 86_400,
      ...partial,
    };
    if (offers.some((x) => x.id === o.id)) throw new Error(`fake Vast: offer ${o.id} exists already`);
    offers.push(o);
    return o;
  };

  /** Whether a provisioning instance is due its next step (a stuck one never starts running). */
  const due = (h: Held) =>
    !!h.pending &&
    !(h.stuck && h.pending.to === 'running') &&
    (h.pending.readsLeft <= 0 || Date.now() >= h.pending.dueAt);
  const advance = (h: Held) => {
    while (due(h)) step(h);
  };
  const step = (h: Held) => {
    const to = h.pending!.to;
    h.actual = to;
    if (to === 'loading') {
      h.statusMsg = `Pulling image ${String(h.request.image ?? '')}`; // [U] the real wording
      h.pending = {
        to: 'running',
        readsLeft: options.loadingReads,
        dueAt: options.loadingMs === undefined ? Infinity : Date.now() + options.loadingMs,
      };
    } else {
      h.statusMsg = `success, running ${String(h.request.image ?? '')}`; // [U]
      h.pending = undefined;
    }
  };
  /** One read of the instance: it is rendered as it is now, and the read counts toward a step. */
  const read = (h: Held) => {
    advance(h);
    const r = render(h);
    if (h.pending) {
      h.pending.readsLeft -= 1;
      advance(h);
    }
    return r;
  };
  const startProvisioning = (h: Held, to: 'loading' | 'running') => {
    const ms = to === 'loading' ? options.provisionMs : options.loadingMs;
    h.pending = {
      to,
      readsLeft: to === 'loading' ? options.provisionReads : options.loadingReads,
      dueAt: ms === undefined ? Infinity : Date.now() + ms,
    };
    advance(h);
  };

  /** A halted instance starts again on its machine: `loading` at once, then `running`. */
  const restart = (h: Held) => {
    h.cur = 'running';
    h.actual = 'loading';
    h.statusMsg = `Starting ${String(h.request.image ?? '')}`; // [U]
    startProvisioning(h, 'running');
  };

  const render = (h: Held): Record<string, unknown> => {
    const o = h.offer;
    const shown = h.actual !== null;
    const direct = h.endpoint.direct ?? h.endpoint;
    const now = Date.now() / 1000;
    return {
      id: h.id,
      machine_id: o.machine_id,
      host_id: o.host_id,
      bundle_id: o.bundle_id,
      actual_status: h.actual,
      intended_status: h.intended,
      cur_state: h.cur,
      next_state: h.cur,
      status_msg: h.statusMsg,
      label: h.label,
      template_id: null,
      template_hash_id: null,
      template_name: null,
      image_uuid: h.request.image ?? null,
      image_args: h.request.args ?? [],
      image_runtype: h.request.runtype ?? 'ssh',
      extra_env: h.env,
      onstart: h.request.onstart ?? null,
      jupyter_token: randomHexFor(h.id),
      ssh_idx: shown ? String(h.sshIdx) : null,
      ssh_host: shown ? h.endpoint.host : null,
      ssh_port: shown ? h.endpoint.port : null,
      public_ipaddr: direct.host,
      local_ipaddrs: '172.17.0.2 \n',
      ports:
        h.actual === 'running' ? { '22/tcp': [{ HostIp: '0.0.0.0', HostPort: String(direct.port) }] } : null,
      direct_port_start: -1,
      direct_port_end: -1,
      dph_base: o.dph_base,
      dph_total: h.price,
      min_bid: o.min_bid,
      is_bid: h.isBid,
      gpu_name: o.gpu_name,
      num_gpus: o.num_gpus,
      gpu_ram: o.gpu_ram,
      gpu_totalram: o.gpu_total_ram,
      gpu_arch: o.gpu_arch,
      cpu_ram: o.cpu_ram,
      cpu_cores_effective: o.cpu_cores_effective,
      disk_space: h.disk,
      cuda_max_good: o.cuda_max_good,
      driver_version: o.driver_version,
      geolocation: o.geolocation,
      verification: o.verification,
      reliability2: o.reliability,
      inet_up: o.inet_up,
      inet_down: o.inet_down,
      start_date: h.startDate,
      end_date: o.end_date,
      duration: now - h.startDate,
      uptime_mins: h.actual === 'running' ? (now - h.startDate) / 60 : null,
    };
  };

  const view = (h: Held): FakeInstance => ({
    id: h.id,
    offerId: h.offer.id,
    label: h.label,
    actualStatus: h.actual,
    intendedStatus: h.intended,
    isBid: h.isBid,
    price: h.price,
    endpoint: h.endpoint,
    request: h.request,
    resource: render(h),
  });

  /** The rental itself, once the request is known good and the offer free. */
  const rent = (o: FakeOffer, body: Record<string, unknown>, env: [string, string][]): Held => {
    const endpoint = freeEndpoints.shift()!;
    const isBid = typeof body.price === 'number';
    const price = isBid ? (body.price as number) : o.dph_total;
    const now = Date.now();
    const rental: Rental = {
      instanceId: nextInstance++,
      offerId: o.id,
      label: typeof body.label === 'string' ? body.label : null,
      price,
      isBid,
      rentedAt: now,
    };
    ledger.push(rental);
    const h: Held = {
      id: rental.instanceId,
      offer: o,
      request: body,
      label: rental.label,
      actual: null,
      intended: body.target_state === 'stopped' ? 'stopped' : 'running',
      cur: 'running',
      statusMsg: null,
      stuck: options.stuck,
      endpoint,
      sshIdx: sshIdx++,
      isBid,
      price,
      disk: typeof body.disk === 'number' ? body.disk : 10,
      env,
      startDate: now / 1000,
      rental,
      logs: '',
    };
    held.push(h);
    startProvisioning(h, 'loading');
    return h;
  };

  const drop = async (h: Held, why: StopReason) => {
    await opts.onStop?.(view(h), why);
    // Two destroys of one instance at once: the second finds it gone (never another instance).
    if (!held.includes(h)) return;
    held.splice(held.indexOf(h), 1);
    freeEndpoints.push(h.endpoint);
    h.rental.destroyedAt = Date.now();
  };

  const halt = async (h: Held, why: Exclude<StopReason, 'destroyed'>, actual: string, msg: string | null) => {
    await opts.onStop?.(view(h), why);
    h.pending = undefined;
    h.actual = actual;
    h.statusMsg = msg;
    if (why === 'stopped' || why === 'outbid') h.cur = 'stopped';
  };

  // ---- routes -------------------------------------------------------------------------------

  const search = (body: unknown): Reply => {
    if (!isObject(body)) return vastError(400, 'invalid_args', 'error 400: Invalid args: invalid json body');
    const type = body.type ?? 'on-demand';
    if (!['on-demand', 'ondemand', 'bid', 'reserved'].includes(String(type)))
      return vastError(400, 'invalid_args', `error 400: Invalid args: unknown type ${JSON.stringify(type)}`);
    const conds: [string, string, unknown][] = [];
    for (const [k, v] of Object.entries(body)) {
      if (SEARCH_KEYS.has(k)) continue;
      const f = OFFER_ALIASES[k] ?? k;
      if (!OFFER_FIELDS.has(f))
        return vastError(400, 'invalid_args', `error 400: Invalid args: unknown field ${k}`);
      if (!isObject(v))
        return vastError(400, 'invalid_args', `error 400: Invalid args: ${k} needs {op: value}`);
      for (const [op, val] of Object.entries(v)) {
        if (!OPS.has(op))
          return vastError(400, 'invalid_args', `error 400: Invalid args: unknown operator ${op}`);
        if ((op === 'in' || op === 'notin') && !Array.isArray(val))
          return vastError(400, 'invalid_args', `error 400: Invalid args: ${k}.${op} needs a list`);
        if (val !== 'any') conds.push([f, op, val]);
      }
    }
    const order = body.order ?? [['score', 'desc']];
    if (!Array.isArray(order) || !order.every((e) => Array.isArray(e) && typeof e[0] === 'string'))
      return vastError(
        400,
        'invalid_args',
        'error 400: Invalid args: order must be [[field, "asc"|"desc"], …]',
      );
    const bid = type === 'bid';
    const found = (freeEndpoints.length ? offers.filter((o) => !taken(o)) : [])
      .map((o): FakeOffer => (bid ? { ...o, dph_total: o.min_bid, is_bid: true } : { ...o }))
      .filter((o) => conds.every(([f, op, val]) => compare(o[f], op, val)))
      .sort(byOrder(order as [string, string][]));
    const cap = opts.searchCap ?? 64;
    const limit = typeof body.limit === 'number' && body.limit > 0 ? Math.min(body.limit, cap) : cap;
    const answered = found.slice(0, limit);
    // Another account rents the cheapest of what this search answered before this one can.
    for (const o of answered.slice(0, takeAfterSearch)) elsewhere.add(o.id);
    takeAfterSearch = 0;
    return json(200, { offers: answered });
  };

  const create = (offerId: number, body: unknown): Reply => {
    const ask = { ask_id: offerId };
    if (!isObject(body))
      return vastError(400, 'invalid_args', 'error 400/1782: Invalid args: invalid json', ask);
    const invalid = invalidCreate(body);
    if (invalid) return vastError(400, 'invalid_args', `error 400/3467: Invalid args: ${invalid}`, ask);
    const env = envPairs(body.env);
    if (typeof env === 'string')
      return vastError(400, 'invalid_args', `error 400/3467: Invalid args: ${env}`, ask);
    const o = offers.find((x) => x.id === offerId);
    if (!o)
      return vastError(404, 'invalid_args', `error 404/3603: no_such_ask Instance type by id ${offerId} is not available.`, ask); // prettier-ignore
    if (taken(o) || !freeEndpoints.length) {
      const gone = `no_such_ask Instance type ${offerId} is no longer available.`;
      return opts.takenStatus === 404
        ? vastError(404, 'no_such_ask', `error 404/3603: ${gone}`, ask)
        : vastError(410, 'no_such_ask', `error 410/3907: ${gone}`, ask);
    }
    if (typeof body.price === 'number' && body.price < o.min_bid)
      return vastError(400, 'invalid_price', `error 400: bid ${body.price} is below the minimum bid ${o.min_bid}`, ask); // prettier-ignore
    const h = rent(o, body, env);
    return json(200, { success: true, new_contract: h.id });
  };

  const listV1 = (query: Record<string, string>): Reply => {
    let filters: unknown;
    let order: unknown;
    try {
      filters = JSON.parse(query.select_filters ?? '{}');
      order = JSON.parse(query.order_by ?? '[{"col":"id","dir":"asc"}]');
    } catch (e) {
      return json(400, { error: 'invalid_request', msg: `invalid json: ${String(e)}` });
    }
    if (!isObject(filters))
      return json(400, { error: 'invalid_request', msg: 'select_filters must be an object' });
    const conds: [string, string, unknown][] = [];
    for (const [col, v] of Object.entries(filters)) {
      if (!LIST_FILTERABLE.has(col))
        return json(400, { error: 'invalid_request', msg: `column ${col} cannot be filtered` });
      if (!isObject(v)) return json(400, { error: 'invalid_request', msg: `${col} needs {op: value}` });
      for (const [op, val] of Object.entries(v)) {
        if (!OPS.has(op)) return json(400, { error: 'invalid_request', msg: `unknown operator ${op}` });
        conds.push([col, op, val]);
      }
    }
    if (!Array.isArray(order) || !order.every((o) => isObject(o) && LIST_ORDERABLE.has(String(o.col))))
      return json(400, { error: 'invalid_request', msg: `invalid order_by ${query.order_by}` });
    const keys: [string, 'asc' | 'desc'][] = (order as { col: string; dir?: string }[]).map((o) => [
      o.col,
      o.dir === 'desc' ? 'desc' : 'asc',
    ]);
    if (!keys.some(([c]) => c === 'id')) keys.push(['id', 'asc']);
    for (const h of held) advance(h);
    const rows = held
      .map((h) => ({ h, row: render(h) }))
      .filter(({ row }) => conds.every(([c, op, val]) => compare(row[c], op, val)))
      .sort((a, b) => compareKeys(a.row, b.row, keys));
    let start = 0;
    if (query.after_token) {
      const after = decodeToken(query.after_token);
      if (!after) return json(400, { error: 'invalid_token', msg: 'invalid after_token' });
      start = rows.findIndex(({ row }) => compareKeys(row, after, keys) > 0);
      if (start < 0) start = rows.length;
    }
    const n = Number(query.limit ?? 25);
    const size = !Number.isFinite(n) ? 25 : n <= 0 ? 5 : Math.min(25, Math.floor(n));
    const page = rows.slice(start, start + size);
    const last = page.at(-1);
    const labelCounts: Record<string, number> = {};
    for (const { row } of rows)
      labelCounts[String(row.label ?? '')] = (labelCounts[String(row.label ?? '')] ?? 0) + 1;
    return json(200, {
      success: true,
      instances_found: page.length,
      total_instances: rows.length,
      label_counts: labelCounts,
      next_token:
        start + size < rows.length && last
          ? encodeToken(Object.fromEntries(keys.map(([c]) => [c, last.row[c]])))
          : null,
      instances: page.map(({ h }) => read(h)),
    });
  };

  const manage = async (h: Held, body: unknown): Promise<Reply> => {
    if (!isObject(body) || (body.state === undefined && body.label === undefined))
      return vastError(400, 'invalid_args', 'error 400: Invalid args: give state or label');
    if (body.label !== undefined) {
      if (typeof body.label !== 'string')
        return vastError(400, 'invalid_args', 'error 400: label must be a string');
      if (body.label.length > 1024) return vastError(400, 'label_too_long', 'error 400: label too long');
      h.label = body.label;
      h.rental.label = body.label;
    }
    if (body.state === 'stopped' && h.intended !== 'stopped') {
      h.intended = 'stopped';
      await halt(h, 'stopped', 'stopped', null);
    } else if (body.state === 'running' && !['running', 'loading', null].includes(h.actual)) {
      // A start of a stopped or exited instance; the real one may queue for its GPU ([U]), this one never does.
      h.intended = 'running';
      restart(h);
    } else if (body.state !== undefined && body.state !== 'running' && body.state !== 'stopped')
      return vastError(400, 'invalid_args', `error 400: unknown state ${JSON.stringify(body.state)}`);
    return json(200, { success: true });
  };

  const requestLogs = (h: Held): Reply => {
    const token = randomBytes(12).toString('hex');
    logUrls.set(token, { instanceId: h.id, text: h.logs, readsLeft: opts.logReadyReads ?? 1 });
    return json(200, { success: true, result_url: `${url}/logs/${token}.log` });
  };

  const INSTANCE = /^\/api\/v0\/instances\/(?:(request_logs|bid_price)\/)?(\d+)\/$/;

  const route = async (method: string, path: string, query: Record<string, string>, body: unknown) => {
    const noSuch = (id: string) => vastError(404, 'no_such_instance', `error 404: no_such_instance ${id}`);
    if (path === '/api/v0/bundles/')
      return method === 'POST' ? search(body) : html(405, '405 Method Not Allowed');
    const ask = /^\/api\/v0\/asks\/(\d+)\/$/.exec(path);
    if (ask) return method === 'PUT' ? create(Number(ask[1]), body) : html(405, '405 Method Not Allowed');
    if (path === '/api/v0/instances/' && method === 'GET')
      return vastError(200, 'deprecated_endpoint', '/api/v0/instances/ is deprecated. Use /api/v1/instances/ instead.'); // prettier-ignore
    if (path === '/api/v1/instances/')
      return method === 'GET' ? listV1(query) : html(405, '405 Method Not Allowed');
    const m = INSTANCE.exec(path);
    if (!m) return html(404, '404 Not Found');
    const [, sub, idText] = m as unknown as [string, string | undefined, string];
    const h = find(Number(idText));
    if (sub && method !== 'PUT') return html(405, '405 Method Not Allowed');
    if (sub && !h) return noSuch(idText);
    if (sub === 'request_logs') return requestLogs(h!);
    if (sub === 'bid_price') {
      const b = h!;
      const price = isObject(body) ? body.price : undefined;
      if (typeof price !== 'number' || price < 0.001 || price > 128)
        return vastError(400, 'invalid_price', 'error 400: price must be 0.001–128');
      b.price = price;
      b.rental.price = price;
      return json(200, { success: true });
    }
    if (method === 'GET') return json(200, { instances: h ? read(h) : null });
    if (method === 'DELETE') {
      if (!h) return vastError(404, 'not_found', 'Instance not found');
      await drop(h, 'destroyed');
      return json(200, { success: true, msg: 'Instance destroyed successfully' });
    }
    if (method === 'PUT') return h ? manage(h, body) : noSuch(idText);
    return html(405, '405 Method Not Allowed');
  };

  const takeFault = (method: string, path: string): Fault | undefined => {
    const i = faults.findIndex(
      (f) =>
        (!f.method || f.method === method) &&
        (!f.path || (typeof f.path === 'string' ? f.path === path : f.path.test(path))),
    );
    if (i < 0) return undefined;
    const f = faults[i]!;
    if (--f.left <= 0) faults.splice(i, 1);
    return f;
  };

  const faultReply = (f: Fault, path: string): Reply => {
    if (f.kind === '429') {
      const said = `API requests too frequent endpoint threshold=${f.threshold ?? 1}`;
      const headers = f.retryAfter !== undefined ? { 'Retry-After': String(f.retryAfter) } : undefined;
      return f.body === 'json'
        ? { status: 429, type: 'application/json', text: JSON.stringify({ detail: said }), headers }
        : { status: 429, type: 'text/plain; charset=utf-8', text: said, headers };
    }
    if (f.kind === '500') {
      const status = f.status ?? 500;
      return html(status, GATEWAY_TITLES[status] ?? `${status} Server Error`);
    }
    if (f.kind === 'garbage-html') {
      const page = html(200, 'Just a moment...') as { text: string };
      return { status: 200, type: 'text/html; charset=UTF-8', text: page.text };
    }
    return vastError(200, 'deprecated_endpoint', `${path} is deprecated. Use /api/v1/instances/ instead.`);
  };

  const authOf = (req: IncomingMessage, query: Record<string, string>): RecordedRequest['auth'] => {
    const h = req.headers.authorization;
    if (h !== undefined) return h === `Bearer ${apiKey}` ? 'bearer' : 'wrong';
    if (query.api_key !== undefined) return query.api_key === apiKey ? 'query' : 'wrong';
    return 'missing';
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString();
    const u = new URL(req.url ?? '/', 'http://fake');
    const method = req.method ?? 'GET';
    const query = Object.fromEntries(u.searchParams);
    const auth = authOf(req, query);
    if (query.api_key !== undefined) query.api_key = '[redacted]';
    let body: unknown;
    let parsed = true;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = false;
    }
    const record = (status: number, fault?: FaultKind) =>
      requests.push({ method, path: u.pathname, query, ...(text ? { body: parsed ? body : text } : {}), status, auth, ...(fault ? { fault } : {}) }); // prettier-ignore

    const dropped = () => {
      record(0, 'drop');
      res.socket?.destroy();
    };
    if (u.pathname.startsWith('/logs/')) return send(res, record, logRead(u.pathname));
    const fault = takeFault(method, u.pathname);
    if (fault && !fault.applied) {
      if (fault.kind === 'drop') return dropped();
      return send(res, (s) => record(s, fault.kind), faultReply(fault, u.pathname));
    }
    let reply: Reply;
    if (auth === 'wrong' || auth === 'missing') reply = vastError(401, 'auth_error', 'Invalid user key');
    else if (!parsed) reply = vastError(400, 'invalid_args', 'error 400/1782: Invalid args: invalid json');
    else {
      try {
        reply = await route(method, u.pathname, query, body);
      } catch (e) {
        reply = html(500, `500 Internal Server Error (fake: ${String(e)})`);
      }
    }
    if (fault?.kind === 'drop') return dropped();
    if (fault) return send(res, (s) => record(s, fault.kind), faultReply(fault, u.pathname));
    send(res, record, reply);
  };

  const logRead = (path: string): Reply => {
    const entry = logUrls.get(path.slice('/logs/'.length).replace(/\.log$/, ''));
    if (!entry)
      return { status: 404, type: 'application/xml', text: '<Error><Code>NoSuchKey</Code></Error>' };
    if (entry.readsLeft-- > 0) return { status: 404, type: 'application/xml', text: '<Error><Code>NoSuchKey</Code></Error>' }; // prettier-ignore
    return { status: 200, type: 'text/plain; charset=utf-8', text: entry.text };
  };

  const server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  url = `http://127.0.0.1:${port}`;
  let isDown = false;
  let stopped = false;
  let upTimer: NodeJS.Timeout | undefined;

  const close = () =>
    new Promise<void>((r) => {
      server.close(() => r());
      server.closeAllConnections();
    });
  const up = async () => {
    clearTimeout(upTimer);
    upTimer = undefined;
    if (!isDown || stopped) return;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => (server.off('error', reject), resolve()));
    });
    isDown = false;
  };

  const need = (id: number, states: (string | null)[], what: string): Held => {
    const h = find(id);
    if (!h || !states.includes(h.actual))
      throw new Error(`fake Vast: instance ${id} is ${h ? String(h.actual) : 'absent'}, cannot ${what}`);
    return h;
  };

  return {
    url,
    apiKey,
    requests,
    ledger,
    options,
    seedOffer,
    withdrawOffers: () => {
      for (const o of [...offers]) if (!taken(o)) offers.splice(offers.indexOf(o), 1);
    },
    offers: () => offers.filter((o) => !taken(o)),
    instances: () => held.map(view),
    instance: (id) => {
      const h = find(id);
      return h && view(h);
    },
    seedInstance(body, offer) {
      if (!freeEndpoints.length) throw new Error('fake Vast: no ssh endpoint left to seed an instance');
      const o = seedOffer(offer);
      const h = rent(
        o,
        { client_id: 'me', image: 'vastai/base-image', runtype: 'ssh_direc ssh_proxy', ...body },
        [],
      );
      h.pending = undefined;
      h.actual = 'running';
      h.statusMsg = `success, running ${String(h.request.image)}`;
      return view(h);
    },
    takeAfterNextSearch: (n = 1) => void (takeAfterSearch = n),
    stuck: (id, on = true) => {
      const h = find(id);
      if (!h) throw new Error(`fake Vast: no instance ${id} to hold`);
      h.stuck = on;
      if (!on) advance(h);
    },
    async outbid(id) {
      const h = need(id, ['loading', 'running'], 'be outbid');
      if (!h.isBid) throw new Error(`fake Vast: instance ${id} is on demand: only a bid instance is outbid`);
      await halt(h, 'outbid', 'stopped', 'Instance paused: outbid by a higher priority rental'); // [U] the wording
    },
    resume(id) {
      restart(need(id, ['stopped'], 'resume'));
    },
    exit: async (id) => halt(need(id, ['loading', 'running'], 'exit'), 'exited', 'exited', 'Error: container exited'), // prettier-ignore
    offline: async (id) =>
      halt(need(id, [null, 'loading', 'running'], 'go offline'), 'offline', 'offline', null),
    setLogs(id, text) {
      const h = find(id);
      if (!h) throw new Error(`fake Vast: no instance ${id}`);
      h.logs = text;
    },
    failNext(n, kind, o = {}) {
      faults.push({ ...o, kind, left: n });
    },
    async down(ms) {
      if (!isDown) {
        isDown = true;
        await close();
      }
      clearTimeout(upTimer);
      if (ms !== undefined) upTimer = setTimeout(() => void up(), ms);
    },
    up,
    billing: () => ledger.filter((r) => r.destroyedAt === undefined),
    async stop() {
      stopped = true;
      clearTimeout(upTimer);
      if (!isDown) await close();
      isDown = true;
    },
  };
}

function send(res: ServerResponse, record: (status: number) => unknown, r: Reply): void {
  record(r.status);
  if ('json' in r) {
    res.writeHead(r.status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(r.json));
  } else {
    res.writeHead(r.status, { 'content-type': r.type, ...(r.headers ?? {}) });
    res.end(r.text);
  }
}

/** The body's problem per the reference's `x-input-validation`, or undefined. */
function invalidCreate(b: Record<string, unknown>): string | undefined {
  if ((typeof b.image !== 'string' || !b.image) && typeof b.template_hash_id !== 'string')
    return "'image' is required";
  if (typeof b.image === 'string' && b.image.length > 1024) return 'image too long';
  if (b.label !== undefined && b.label !== null && (typeof b.label !== 'string' || b.label.length > 256))
    return 'label must be a string of at most 256 characters';
  if (b.disk !== undefined && (typeof b.disk !== 'number' || b.disk < 8)) return 'disk must be at least 8 GB';
  const onstart = typeof b.onstart === 'string' ? b.onstart : '';
  const args = Array.isArray(b.args) ? b.args.join(' ') : typeof b.args_str === 'string' ? b.args_str : '';
  if (onstart.length + args.length > 4096) return 'args and onstart together exceed 4096 characters';
  if (
    b.price !== undefined &&
    b.price !== null &&
    (typeof b.price !== 'number' || b.price < 0.001 || b.price > 128)
  )
    return 'price must be between 0.001 and 128';
  if (
    b.runtype !== undefined &&
    (typeof b.runtype !== 'string' || !b.runtype.split(/\s+/).every((t) => RUNTYPES.has(t)))
  )
    return `unknown runtype ${JSON.stringify(b.runtype)}`;
  return undefined;
}

/** The rental's env as `[name, value]` pairs: a JSON object (what the CLI sends) or `-e K=V -p A:B` flags. */
function envPairs(env: unknown): [string, string][] | string {
  let pairs: [string, string][];
  if (env === undefined || env === null) pairs = [];
  else if (isObject(env)) {
    if (!Object.values(env).every((v) => typeof v === 'string')) return 'env values must be strings';
    pairs = Object.entries(env as Record<string, string>);
  } else if (typeof env === 'string') {
    pairs = [];
    for (const m of env.matchAll(/(-[ep])\s+(\S+)/g)) {
      const [flag, arg] = [m[1]!, m[2]!];
      if (flag === '-p') pairs.push([`-p ${arg}`, '1']);
      else if (arg.includes('='))
        pairs.push([arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)]);
    }
  } else return 'env must be an object';
  if (pairs.some(([, v]) => v.length > 256)) return 'an env value is longer than 256 characters';
  if (pairs.reduce((n, [k, v]) => n + k.length + v.length, 0) > 32768)
    return 'env is larger than 32768 characters';
  return pairs;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return !!v && typeof v === 'object' && !Array.isArray(v);
}

/** One condition of a search or list filter. */
function compare(a: unknown, op: string, v: unknown): boolean {
  switch (op) {
    case 'eq':
      return a === v;
    case 'neq':
      return a !== v;
    case 'in':
      return (v as unknown[]).includes(a);
    case 'notin':
      return !(v as unknown[]).includes(a);
  }
  if (a === null || a === undefined || v === null || v === undefined) return false;
  const [x, y] = typeof a === 'number' ? [a, Number(v)] : [String(a), String(v)];
  return op === 'gt' ? x > y : op === 'gte' ? x >= y : op === 'lt' ? x < y : x <= y;
}

/** Search order: `[[field, "asc"|"desc"], …]`. */
function byOrder(order: [string, string][]) {
  return (a: FakeOffer, b: FakeOffer) => {
    for (const [f, dir] of order) {
      const c = cmp(a[OFFER_ALIASES[f] ?? f], b[OFFER_ALIASES[f] ?? f]);
      if (c) return dir === 'desc' ? -c : c;
    }
    return a.id - b.id;
  };
}

function compareKeys(
  a: Record<string, unknown>,
  b: Record<string, unknown>,
  keys: [string, 'asc' | 'desc'][],
) {
  for (const [c, dir] of keys) {
    const r = cmp(a[c], b[c]);
    if (r) return dir === 'desc' ? -r : r;
  }
  return 0;
}

function cmp(a: unknown, b: unknown): number {
  if (a === b) return 0;
  if (a === null || a === undefined) return -1;
  if (b === null || b === undefined) return 1;
  return typeof a === 'number' && typeof b === 'number' ? a - b : String(a) < String(b) ? -1 : 1;
}

/** Keyset cursor: the last row's sort values, as the reference's example token is. */
function encodeToken(values: Record<string, unknown>): string {
  return Buffer.from(JSON.stringify({ values })).toString('base64');
}

function decodeToken(token: string): Record<string, unknown> | undefined {
  try {
    const v = (JSON.parse(Buffer.from(token, 'base64').toString()) as { values?: unknown }).values;
    return isObject(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

function randomHexFor(id: number): string {
  return Buffer.from(`jupyter-${id}`).toString('hex').padEnd(64, '0').slice(0, 64);
}
