/**
 * What a `code.repo` URL (and a submodule's URL in its `.gitmodules`) may be. A pusher of specs
 * chooses these, and the controller fetches them on its own host, so the rule is narrow: smart
 * HTTP only (`https://`, and `http://`, which the loopback tests need), no credentials in the URL
 * (a token is named, never written: `code.tokenSecret`), no query or fragment. `ssh://`, `git@…`,
 * `file://`, `ext::` and paths are refused here and again by `GIT_ALLOW_PROTOCOL=http:https` on
 * every fetch. Pure: the spec rules and the fetcher share it.
 */

/** What is wrong with a URL, and how to fix it. */
export interface UrlProblem {
  message: string;
  hint: string;
}

const MAX_URL_LENGTH = 2048;

/** Undefined when `url` may be fetched as a code repository; else what is wrong with it. */
export function codeRepoUrlProblem(url: string): UrlProblem | undefined {
  const https = 'use the repository\'s https:// clone URL (the one "git clone" takes over HTTPS)';
  if (url.length > MAX_URL_LENGTH)
    return { message: `the URL is ${url.length} characters, over ${MAX_URL_LENGTH}`, hint: https };
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(url)?.[1]?.toLowerCase();
  if (scheme && scheme !== 'https' && scheme !== 'http') return schemeProblem(scheme, https);
  // eslint-disable-next-line no-control-regex
  if (/[\s\x00-\x1f\x7f]/.test(url))
    return { message: 'the URL holds a space or a control character', hint: https };
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return {
      message: `"${url}" is not an absolute URL (ssh "git@host:path" and paths are not fetched)`,
      hint: https,
    };
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return schemeProblem(u.protocol.slice(0, -1), https);
  if (u.username || u.password)
    return {
      message: 'the URL holds credentials: a token never belongs in a spec (git history keeps it)',
      hint: "remove them from the URL; name the token instead (code.tokenSecret, or the controller's ADV_GIT_TOKEN)",
    };
  if (u.search || u.hash || url.includes('#') || url.includes('?'))
    return { message: 'the URL has a query or a fragment', hint: https };
  if (!u.hostname || u.pathname.replace(/\/+$/, '') === '')
    return { message: 'the URL names no repository path', hint: https };
  return undefined;
}

function schemeProblem(scheme: string, hint: string): UrlProblem {
  return {
    message: `${scheme}:// is not fetched: the controller fetches code over HTTP(S) only, so nothing a spec names runs a program or reads a file on its host`,
    hint,
  };
}

/** One spelling per repository: the parsed URL, without a trailing slash. */
export function normalizeRepoUrl(url: string): string {
  return new URL(url).href.replace(/\/+$/, '');
}

/** `scheme://host[:port]`: where a token may be sent. */
export function originOf(url: string): string {
  const u = new URL(url);
  return `${u.protocol}//${u.host}`;
}

/**
 * The URL of a submodule as its superproject's `.gitmodules` gives it: absolute, or relative
 * (`./x`, `../x`) to the superproject's URL as git resolves it (the superproject's URL is the
 * folder `../` leaves; `..` never climbs past the host, so a relative URL stays on its host).
 */
export function submoduleUrl(superUrl: string, entry: string): { url: string } | { problem: UrlProblem } {
  const relative = entry.startsWith('./') || entry.startsWith('../');
  let url = entry;
  if (relative) {
    try {
      url = new URL(entry, `${superUrl.replace(/\/+$/, '')}/`).href;
    } catch {
      return { problem: { message: `"${entry}" is not a relative URL`, hint: 'write ../name.git' } };
    }
  }
  const problem = codeRepoUrlProblem(url);
  return problem ? { problem } : { url: normalizeRepoUrl(url) };
}
