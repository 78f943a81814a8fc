/**
 * Per-document rules of the notification kinds, beyond the schema: a selector that parses, and a
 * Provider that has what its type needs. Reported at the field, with how to fix it.
 */
import { checkSelector, SELECTOR_HINT } from '../selector.js';
import { formatPath } from '../spec/diagnostic.js';
import type { Locator } from '../spec/parse.js';
import type { BackendRef } from '../spec/refs.js';
import type { Alert, Provider } from '../spec/schema.js';

type Path = (string | number)[];
type ErrorFn = (code: string, path: Path, message: string, hint?: string) => void;

/** An Alert's selector parses as `adv get -l` would parse it. */
export function alertRules(error: ErrorFn, a: Alert): void {
  if (a.spec.selector === undefined) return;
  const r = checkSelector(a.spec.selector);
  if (!Array.isArray(r))
    error(
      'SelectorInvalid',
      ['spec', 'selector'],
      `requirement ${JSON.stringify(r.requirement)}: ${r.problem}`,
      SELECTOR_HINT,
    );
}

/** The GitHub repository a `github` Provider's address names: `https://host/<owner>/<repo>[.git]`. */
export function githubRepoOf(address: string): { owner: string; repo: string } | undefined {
  let url: URL;
  try {
    url = new URL(address);
  } catch {
    return undefined;
  }
  const m = /^\/([A-Za-z0-9_.-]+)\/([A-Za-z0-9_.-]+?)(\.git)?\/?$/.exec(url.pathname);
  return m ? { owner: m[1]!, repo: m[2]! } : undefined;
}

/**
 * The secret a Provider names, located: the loader's cross-file rules check it like a Backend's
 * (`StoreCredential`: never the object store's keys, which would go to the Provider's endpoint).
 */
export function providerSecretRefsOf(p: Provider, loc: Locator): BackendRef[] {
  const ref = p.spec.secretRef?.name;
  const path = ['spec', 'secretRef', 'name'];
  return ref === undefined ? [] : [{ name: ref, path: formatPath(path), ...loc.at(path) }];
}

/** A Provider has the address and secret its type needs, and no credential in its address. */
export function providerRules(error: ErrorFn, p: Provider): void {
  const { type, address, secretRef } = p.spec;
  if (secretRef?.name.startsWith('ADV_'))
    error(
      'ReservedSecret',
      ['spec', 'secretRef', 'name'],
      `"${secretRef.name}" is one of the controller's own settings or credentials (ADV_*): no spec may name it`,
      'give the Provider a secret of its own (e.g. SLACK_WEBHOOK_URL), set where the controller reads secrets',
    );
  if (address !== undefined) {
    let url: URL | undefined;
    try {
      url = new URL(address);
    } catch {
      error(
        'AddressInvalid',
        ['spec', 'address'],
        `${JSON.stringify(address)} is not a URL`,
        'write an http(s) URL, e.g. "https://hooks.example.com/adventuretime"',
      );
    }
    if (url && (url.username || url.password))
      error(
        'CredentialInAddress',
        ['spec', 'address'],
        'the address carries a user or password: specs are readable by everyone who can read the repo',
        'put the credential in a secret and name it in spec.secretRef',
      );
  }
  if (type === 'webhook' && address === undefined)
    error('AddressRequired', ['spec'], 'a webhook Provider needs spec.address', 'add address: https://…');
  if (type === 'slack' && address === undefined && secretRef === undefined)
    error(
      'AddressRequired',
      ['spec'],
      'a slack Provider needs the webhook URL: spec.secretRef (the URL is a credential) or spec.address',
      'add secretRef: {name: SLACK_WEBHOOK_URL} and set that secret on the controller',
    );
  if (type === 'github') {
    if (address === undefined || !githubRepoOf(address))
      error(
        'AddressRequired',
        ['spec', ...(address === undefined ? [] : ['address'])],
        'a github Provider needs spec.address naming the specs repository',
        'write address: https://github.com/<owner>/<repo>',
      );
    if (secretRef === undefined)
      error(
        'SecretRequired',
        ['spec'],
        'a github Provider needs a token: spec.secretRef',
        'add secretRef: {name: GITHUB_TOKEN} (a token that may write commit statuses) and set that secret on the controller',
      );
  }
  if (type !== 'github' && p.spec.apiUrl !== undefined)
    error(
      'FieldNotUsed',
      ['spec', 'apiUrl'],
      `apiUrl is read by github Providers only, not ${type}`,
      'remove it',
    );
}
