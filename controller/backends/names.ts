/**
 * Names and label values within the rules clouds and Kubernetes share (RFC 1035 labels: lowercase
 * letters, digits and `-`, at most 63 characters), derived from job and run names that may hold a
 * `.` or run longer. Used by the backends whose resources are named after the job (TPU nodes,
 * Volcano Jobs and their pods).
 */
import { createHash } from 'node:crypto';

const short = (s: string, n: number): string => createHash('sha256').update(s).digest('hex').slice(0, n);

/**
 * A DNS label for a name, at most `max` characters: lowercase letters, digits and `-`. Job names
 * are `adv-<run>-<n>` with DNS-1123 run names, so only a `.` needs replacing; when one was (or
 * the name was cut), a hash of the whole name keeps `a.b` and `a-b` apart.
 */
export function dnsLabelOf(name: string, max = 63): string {
  const plain = name.toLowerCase().replace(/[^a-z0-9-]/g, '-');
  if (plain === name && plain.length <= max) return plain;
  return `${plain.slice(0, max - 9).replace(/-+$/, '')}-${short(name, 8)}`;
}

/** A label value: lowercase letters, digits, `_` and `-`, at most 63 characters. */
export function labelValue(s: string): string {
  const v = s.toLowerCase().replace(/[^a-z0-9_-]/g, '-');
  return v.length <= 63 ? v : `${v.slice(0, 54)}-${short(s, 8)}`;
}
