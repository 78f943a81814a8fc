import { describe, expect, it } from 'vitest';
import { codeRepoUrlProblem, normalizeRepoUrl, originOf, submoduleUrl } from './code-repo-url.js';

describe('code.repo URLs', () => {
  it.each([
    ['https://github.com/lab/mono.git', undefined],
    ['http://127.0.0.1:8080/mono.git', undefined],
    ['ssh://git@github.com/lab/mono.git', /ssh:\/\/ is not fetched/],
    ['git@github.com:lab/mono.git', /not an absolute URL/],
    ['file:///etc/passwd', /file:\/\/ is not fetched/],
    ['ext::sh -c touch% /tmp/x', /ext:\/\/ is not fetched/],
    ['/srv/git/mono.git', /not an absolute URL/],
    ['https://user:tok@github.com/lab/mono.git', /holds credentials/],
    ['https://github.com/lab/mono.git?x=1', /query or a fragment/],
    ['https://github.com/', /no repository path/],
    ['https://github.com/a b.git', /space or a control character/],
    ['https://github.com/a\nb.git', /space or a control character/],
  ])('%j', (url, problem) => {
    const p = codeRepoUrlProblem(url);
    if (problem) expect(p?.message).toMatch(problem);
    else expect(p).toBeUndefined();
  });

  it('has one spelling per repository, and an origin the token is scoped to', () => {
    expect(normalizeRepoUrl('HTTPS://GitHub.com:443/lab/mono.git/')).toBe('https://github.com/lab/mono.git');
    expect(originOf('http://127.0.0.1:8080/a/b.git')).toBe('http://127.0.0.1:8080');
  });

  it.each([
    ['../lib.git', 'https://h.example/org/lib.git'],
    ['./lib', 'https://h.example/org/mono.git/lib'],
    ['../../other/lib.git', 'https://h.example/other/lib.git'],
    // `..` never climbs past the host: a relative URL stays on the superproject's host.
    ['../../../../../evil.example/x.git', 'https://h.example/evil.example/x.git'],
    ['https://other.example/lib.git', 'https://other.example/lib.git'],
  ])('submodule url %j of https://h.example/org/mono.git → %s', (entry, url) => {
    expect(submoduleUrl('https://h.example/org/mono.git', entry)).toEqual({ url });
  });

  it.each(['file:///etc', 'ext::sh -c id', 'git@h.example:org/lib.git', '/abs/path', '-upload-pack=x'])(
    'refuses the submodule url %j',
    (entry) => {
      expect(submoduleUrl('https://h.example/org/mono.git', entry)).toHaveProperty('problem');
    },
  );
});
