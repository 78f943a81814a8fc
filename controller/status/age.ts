/** How long ago a status time was, kubectl-style (`45s`, `12m`, `5h`, `3d`): `adv get` and the dashboard. */
export function age(fromIso: string | undefined, now = Date.now()): string {
  if (!fromIso) return '-';
  const s = Math.max(0, Math.floor((now - Date.parse(fromIso)) / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 120) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h`;
  return `${Math.floor(h / 24)}d`;
}
