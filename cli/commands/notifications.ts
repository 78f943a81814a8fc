/**
 * `adv get alerts|providers` and `adv describe alert|provider NAME`: the Alerts' outboxes on the
 * status branch. Providers are shown as the Alerts use them (each outbox names its Provider), so
 * a Provider no Alert refers to is not listed: it sends nothing.
 */
import { stringify } from 'yaml';
import { AdvError, ErrorCode, age, type AlertDelivery, type AlertStatusDoc } from '../../controller/index.js';
import { renderTable } from '../format.js';
import { printable, safe, type Io } from '../output.js';
import { openStatus, type StatusReader } from '../status-reader.js';

export const NOTIFY_KINDS = /^(alerts?|providers?)$/i;

type Opts = { repo?: string; statusBranch?: string; output: string };

function outboxes(r: StatusReader): AlertStatusDoc[] {
  return r.store.names('Alert').flatMap((n) => r.store.get<AlertStatusDoc>('Alert', n) ?? []);
}

const ready = (d: AlertStatusDoc) => d.status.conditions.find((c) => c.type === 'Ready');

/** The newest error of a record not delivered, for the table. */
function lastError(docs: readonly AlertStatusDoc[]): string {
  const open = docs
    .flatMap((d) => Object.values(d.status.deliveries))
    .filter((x) => x.state !== 'delivered' && x.lastError)
    .sort((a, b) => a.at.localeCompare(b.at));
  return open.at(-1)?.lastError ?? '';
}

function sum(docs: readonly AlertStatusDoc[], k: 'pending' | 'delivered' | 'failed'): string {
  return String(docs.reduce((n, d) => n + d.status.counts[k], 0));
}

function byProvider(docs: readonly AlertStatusDoc[]): Map<string, AlertStatusDoc[]> {
  const out = new Map<string, AlertStatusDoc[]>();
  for (const d of docs) out.set(d.status.provider, [...(out.get(d.status.provider) ?? []), d]);
  return out;
}

function notFound(kind: string, name: string): AdvError {
  return new AdvError(ErrorCode.NotFound, `${kind} "${printable(name)}" has no status`, {
    hint: `adv get ${kind}s lists them (an Alert has a status once the controller has loaded it)`,
  });
}

/** `adv get alerts` / `adv get providers`. */
export async function getNotifications(
  io: Io,
  kindArg: string,
  name: string | undefined,
  opts: Opts,
): Promise<void> {
  const providers = /^providers?$/i.test(kindArg);
  const r = await openStatus(opts, io);
  try {
    let docs = outboxes(r);
    if (name && !providers) docs = docs.filter((d) => d.metadata.name === name);
    const groups = [...byProvider(docs)].filter(([p]) => !name || !providers || p === name);
    if (name && (providers ? !groups.length : !docs.length))
      throw notFound(providers ? 'provider' : 'alert', name);
    if (opts.output === 'json' || opts.output === 'yaml') {
      const items = providers
        ? groups.map(([p, ds]) => ({ name: p, alerts: ds.map((d) => d.metadata.name) }))
        : docs;
      const out = { items };
      return void io.stdout.write(
        opts.output === 'json' ? JSON.stringify(out, null, 2) + '\n' : stringify(out),
      );
    }
    if (opts.output === 'name') {
      const names = providers ? groups.map(([p]) => p) : docs.map((d) => d.metadata.name);
      return void io.stdout.write(
        names.map((n) => `${providers ? 'provider' : 'alert'}/${printable(n)}\n`).join(''),
      );
    }
    const counts = (ds: AlertStatusDoc[]) => [sum(ds, 'pending'), sum(ds, 'delivered'), sum(ds, 'failed')];
    const table = providers
      ? renderTable(
          ['NAME', 'ALERTS', 'PENDING', 'DELIVERED', 'FAILED', 'LAST-ERROR'],
          groups.map(([p, ds]) => [
            p,
            ds.map((d) => d.metadata.name).join(','),
            ...counts(ds),
            lastError(ds),
          ]),
        )
      : renderTable(
          ['NAME', 'PROVIDER', 'READY', 'PENDING', 'DELIVERED', 'FAILED', 'SINCE', 'LAST-ERROR'],
          docs.map((d) => [
            d.metadata.name,
            d.status.provider,
            ready(d)?.status ?? 'Unknown',
            ...counts([d]),
            age(d.status.since),
            lastError([d]) || (ready(d)?.status === 'False' ? ready(d)!.message : ''),
          ]),
        );
    io.stdout.write(docs.length ? table : `No ${providers ? 'providers' : 'alerts'} found.\n`);
  } finally {
    await r.close();
  }
}

/** The most recent deliveries, newest last. */
function deliveriesTable(rows: [string, string, AlertDelivery][], limit = 20): string {
  const recent = rows.sort(([, , a], [, , b]) => a.at.localeCompare(b.at)).slice(-limit);
  return renderTable(
    ['ALERT', 'EVENT-ID', 'STATE', 'TRIES', 'HAPPENED', 'DELIVERED', 'ERROR'],
    recent.map(([alert, id, d]) => [
      alert,
      id,
      d.state,
      String(d.tries),
      age(d.at),
      d.deliveredAt ? age(d.deliveredAt) : d.nextTryAt ? `next try ${d.nextTryAt}` : '-',
      d.lastError ?? '',
    ]),
  );
}

/** `adv describe alert NAME` / `adv describe provider NAME`: conditions and recent deliveries. */
export async function describeNotifications(
  io: Io,
  kindArg: string,
  name: string,
  opts: Opts,
): Promise<void> {
  const provider = /^providers?$/i.test(kindArg);
  const r = await openStatus(opts, io);
  try {
    const docs = outboxes(r).filter((d) => (provider ? d.status.provider : d.metadata.name) === name);
    if (!docs.length) throw notFound(provider ? 'provider' : 'alert', name);
    if (opts.output !== 'text') {
      const doc = provider ? { name, alerts: docs } : docs[0];
      return void io.stdout.write(
        opts.output === 'json' ? JSON.stringify(doc, null, 2) + '\n' : stringify(doc),
      );
    }
    const out: string[] = [safe`Name:       ${name}`];
    if (provider) out.push(safe`Alerts:     ${docs.map((d) => d.metadata.name).join(', ')}`);
    else {
      const d = docs[0]!;
      out.push(
        safe`Provider:   ${d.status.provider}`,
        safe`Since:      ${d.status.since} (events before it are not sent)`,
      );
      for (const c of d.status.conditions)
        out.push(safe`Condition:  ${c.type}=${c.status} (${c.reason})${c.message ? `: ${c.message}` : ''}`);
    }
    const c = (k: 'pending' | 'delivered' | 'failed') => sum(docs, k);
    out.push(`Deliveries: ${c('pending')} pending, ${c('delivered')} delivered, ${c('failed')} failed`, '');
    const rows = docs.flatMap((d) =>
      Object.entries(d.status.deliveries).map(([id, x]): [string, string, AlertDelivery] => [
        d.metadata.name,
        id,
        x,
      ]),
    );
    out.push(rows.length ? deliveriesTable(rows).trimEnd() : 'No events recorded yet.');
    io.stdout.write(out.join('\n') + '\n');
  } finally {
    await r.close();
  }
}
