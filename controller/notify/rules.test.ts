import { describe, expect, it } from 'vitest';
import { SpecLoader } from '../spec/loader.js';
import { githubRepoOf } from './rules.js';

const enc = (s: string) => new TextEncoder().encode(s);
const doc = (kind: string, spec: string) =>
  `apiVersion: adventuretime.dev/v1alpha1\nkind: ${kind}\nmetadata:\n  name: n\nspec:\n${spec}`;

function problems(kind: string, spec: string): string[] {
  const l = new SpecLoader();
  l.loadFile('notifications/n.yaml', enc(doc(kind, spec)), '1');
  return l.result().diagnostics.map((d) => `${d.code}@${d.line}:${d.path}`);
}

describe('Provider and Alert rules', () => {
  it.each<[string, string, string, string[]]>([
    [
      'a signed webhook',
      'Provider',
      '  type: webhook\n  address: https://h.example/x\n  secretRef: {name: HOOK_KEY}\n',
      [],
    ],
    ['a webhook without an address', 'Provider', '  type: webhook\n', ['AddressRequired@6:spec']],
    ['a slack webhook by secret', 'Provider', '  type: slack\n  secretRef: {name: SLACK_URL}\n', []],
    [
      'a credential in the address',
      'Provider',
      '  type: webhook\n  address: https://u:pw@h.example/x\n',
      ['CredentialInAddress@7:spec.address'],
    ],
    [
      'github without a token or repository',
      'Provider',
      '  type: github\n  address: https://github.com/lab\n',
      ['SecretRequired@6:spec', 'AddressRequired@7:spec.address'],
    ],
    [
      'a secret of the controller',
      'Provider',
      '  type: slack\n  secretRef: {name: ADV_API_TOKEN}\n',
      ['ReservedSecret@7:spec.secretRef.name'],
    ],
    ['an unknown type', 'Provider', '  type: teams\n', ['SchemaEnum@6:spec.type']],
    ['an alert', 'Alert', '  providerRef: {name: p}\n  events: [RunFailed]\n  selector: team=ml\n', []],
    [
      'a selector that does not parse',
      'Alert',
      '  providerRef: {name: p}\n  events: [RunFailed]\n  selector: "team in (a,b)"\n',
      ['SelectorInvalid@8:spec.selector'],
    ],
    [
      'an unknown event',
      'Alert',
      '  providerRef: {name: p}\n  events: [RunExploded]\n',
      ['SchemaEnum@7:spec.events[0]'],
    ],
  ])('%s', (_, kind, spec, want) => {
    expect(problems(kind, spec)).toEqual(want);
  });

  it("refuses a Provider naming the object store's credentials, which would go to its endpoint", () => {
    const l = new SpecLoader();
    const storage =
      'apiVersion: adventuretime.dev/v1alpha1\nkind: Storage\nmetadata: {name: s}\nspec:\n  type: s3\n  s3: {bucket: lab-ckpt, credentialsSecret: LAB}\n';
    l.loadFile('storage.yaml', enc(storage), '1');
    l.loadFile(
      'p.yaml',
      enc(
        doc(
          'Provider',
          '  type: github\n  address: https://github.com/a/b\n  secretRef: {name: LAB_SECRET_ACCESS_KEY}\n',
        ),
      ),
      '1',
    );
    expect(l.result().diagnostics.map((d) => `${d.code}@${d.file}:${d.line}`)).toEqual([
      'StoreCredential@p.yaml:8',
    ]);
  });

  it('reads the repository of a github address', () => {
    expect(githubRepoOf('https://github.com/lab/specs.git')).toEqual({ owner: 'lab', repo: 'specs' });
    expect(githubRepoOf('https://ghe.example/lab/specs/')).toEqual({ owner: 'lab', repo: 'specs' });
    expect(githubRepoOf('https://github.com/lab')).toBeUndefined();
  });
});
