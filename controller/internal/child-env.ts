/**
 * The environment of every process the controller spawns (git, ssh-keygen, kubectl, gcloud, tar,
 * flock): an explicit allowlist, never `process.env`. The controller's environment holds the git
 * token, the webhook secret, the store's keys and whatever else its operator exported; a child that
 * inherits it can hand it on — a kubeconfig's `exec:` credential plugin runs with kubectl's
 * environment, and a long-lived child's `/proc/PID/environ` is readable by any process of the
 * same user. So each tool gets a small base (what a program needs to find its way around, proxies
 * and CA bundles), the variables its own configuration is read from (`KUBECONFIG`, `CLOUDSDK_*`,
 * `GIT_*`), and the names an operator lists in `ADV_TOOL_ENV` (say, the AWS keys an EKS
 * kubeconfig's exec plugin reads) — and nothing else.
 */
import { JOB_BASE_ENV } from '../backends/job-env.js';

/** The tools the controller runs. */
export type Tool = 'git' | 'kubectl' | 'gcloud' | 'ssh-keygen' | 'tar' | 'flock' | 'getent';

/** Proxies and CA bundles: how any tool reaches the network the operator set up. */
const NETWORK = [
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
  'ALL_PROXY',
  'http_proxy',
  'https_proxy',
  'no_proxy',
  'all_proxy',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
  'XDG_CONFIG_HOME',
];

/**
 * Per tool: exact names and prefixes of where its configuration is read from. Names of files and
 * profiles, not secrets: a credential stays in the file such a variable names.
 */
const TOOL_VARS: Record<Tool, { names: readonly string[]; prefixes: readonly string[] }> = {
  git: { names: ['SSH_AUTH_SOCK', 'GNUPGHOME', 'GPG_TTY'], prefixes: ['GIT_'] },
  kubectl: {
    names: [
      'KUBECONFIG',
      'KUBECACHEDIR',
      // In a pod, kubectl's in-cluster configuration.
      'KUBERNETES_SERVICE_HOST',
      'KUBERNETES_SERVICE_PORT',
      // What the usual exec plugins (aws eks get-token, gke-gcloud-auth-plugin, kubelogin) read.
      'AWS_PROFILE',
      'AWS_CONFIG_FILE',
      'AWS_SHARED_CREDENTIALS_FILE',
      'AWS_REGION',
      'AWS_DEFAULT_REGION',
      'AWS_ROLE_ARN',
      'AWS_WEB_IDENTITY_TOKEN_FILE',
      'CLOUDSDK_CONFIG',
      'GOOGLE_APPLICATION_CREDENTIALS',
      'USE_GKE_GCLOUD_AUTH_PLUGIN',
      'AZURE_CONFIG_DIR',
    ],
    prefixes: [],
  },
  gcloud: { names: ['GOOGLE_APPLICATION_CREDENTIALS'], prefixes: ['CLOUDSDK_'] },
  'ssh-keygen': { names: [], prefixes: [] },
  tar: { names: [], prefixes: [] },
  flock: { names: [], prefixes: [] },
  getent: { names: [], prefixes: [] },
};

/** Names an operator adds to every tool's environment: `ADV_TOOL_ENV=A,B` in the controller's. */
export const TOOL_ENV_VAR = 'ADV_TOOL_ENV';

/**
 * The environment `tool` runs in, picked from `from` (default: the controller's own): the base,
 * the tool's own configuration variables, and the names `ADV_TOOL_ENV` lists. `ADV_*` names are
 * never passed, whoever lists them.
 */
export function toolEnv(tool: Tool, from: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const { names, prefixes } = TOOL_VARS[tool];
  const extra = (from[TOOL_ENV_VAR] ?? '').split(',').map((s) => s.trim());
  const wanted = (k: string): boolean =>
    !k.startsWith('ADV_') &&
    (JOB_BASE_ENV.includes(k) ||
      k.startsWith('LC_') ||
      NETWORK.includes(k) ||
      names.includes(k) ||
      prefixes.some((p) => k.startsWith(p)) ||
      extra.includes(k));
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(from)) if (v !== undefined && wanted(k)) out[k] = v;
  return out;
}
