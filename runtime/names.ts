/**
 * The one rule for a run name outside the spec schema: a DNS-1123 subdomain of at most 63
 * characters (the schema's `metadata.name` of a Run). `adv exec` checks `--run` with it before the
 * name becomes a store key; the CLI checks names typed on its command line with it.
 */
export const DNS1123_SUBDOMAIN_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export const RUN_NAME_MAX = 63;

export const isRunName = (name: string): boolean =>
  name.length <= RUN_NAME_MAX && DNS1123_SUBDOMAIN_RE.test(name);
