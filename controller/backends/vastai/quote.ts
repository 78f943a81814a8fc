/**
 * What a run would cost per hour on a `vastai` Backend before anything is rented: the cheapest
 * offer the adapter's own search finds for it (`dph_total`, disk included). `adv plan` asks; the
 * descriptor loads this file lazily, as it does the adapter.
 */
import type { RunSpec } from '../../spec/schema.js';
import type { Quote, QuoteSources } from '../types.js';
import { VastClient } from './client.js';
import { offerQuery, type OfferNeeds } from './query.js';
import { DEFAULT_DISK_GB, type VastSettings } from './settings.js';

/** Whether a run rents interruptible machines here: the Backend allows it and the run's policy too. */
export const rentsInterruptible = (settings: VastSettings, spec: RunSpec): boolean =>
  settings.interruptible === true && spec.policy?.preemptible === true;

/** What the run needs from one machine, as the Backend's settings and the run's resources say. */
export function offerNeedsFor(settings: VastSettings, spec: RunSpec, interruptible: boolean): OfferNeeds {
  const r = spec.resources ?? {};
  const cons = spec.backendSelector?.constraints ?? {};
  return {
    gpus: r.gpus || settings.numGpus || 0,
    ...(r.gpuType ? { gpuType: r.gpuType } : settings.gpuName ? { gpuType: settings.gpuName } : {}),
    ...(cons.minVramGiB !== undefined ? { minVramGiB: cons.minVramGiB } : {}),
    ...(cons.minRamGiB !== undefined ? { minRamGiB: cons.minRamGiB } : {}),
    ...(settings.minReliability !== undefined ? { minReliability: settings.minReliability } : {}),
    diskGB: settings.diskGiB ?? DEFAULT_DISK_GB,
    ...(settings.minCuda !== undefined ? { minCuda: settings.minCuda } : {}),
    ...(settings.maxDollarsPerHour !== undefined ? { maxDollarsPerHour: settings.maxDollarsPerHour } : {}),
    verifiedOnly: settings.verifiedOnly ?? true,
    interruptible,
  };
}

/** The cheapest fitting offer's price per hour, or why there is none (no key, no offer, API error). */
export async function quoteVast(settings: VastSettings, spec: RunSpec, src: QuoteSources): Promise<Quote> {
  const key = src.secret(settings.apiKeySecret);
  if (!key) return { error: `the Vast.ai API key ${settings.apiKeySecret} is not set here` };
  const apiUrl = settings.apiUrl ?? src.env.VAST_URL;
  // One try: a plan prints without the quote rather than waiting out the client's backoff.
  const client = new VastClient({
    apiKey: key,
    ...(apiUrl ? { apiUrl } : {}),
    retries: 1,
    timeoutMs: 15_000,
  });
  const interruptible = rentsInterruptible(settings, spec);
  try {
    const offers = await client.searchOffers(offerQuery(offerNeedsFor(settings, spec, interruptible)));
    if (!offers.length) return { error: 'no Vast.ai offer fits the run now' };
    const best = offers.reduce((a, b) => (b.dph_total < a.dph_total ? b : a));
    const what = `${best.gpu_name} ×${best.num_gpus}`;
    return {
      perHour: best.dph_total,
      note: `cheapest of ${offers.length} offer${offers.length === 1 ? '' : 's'}: ${what}${interruptible ? ', interruptible' : ''}`,
    };
  } catch (e) {
    return { error: `Vast.ai offer search failed: ${(e as Error).message}` };
  }
}
