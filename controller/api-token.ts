/**
 * The API token: what the controller's state-changing API (`POST /api/v1/...`) requires as
 * `Authorization: Bearer <token>`, and with `--dashboard-auth` the dashboard and `/metrics` too.
 * It is not the webhook secret: a git host that signs webhooks need not be able to drive the API.
 *
 * Where it comes from: `--api-token-file FILE`, else `$ADV_API_TOKEN`, else a random one made at
 * start and written to `<data dir>/api-token` (mode 0600, as Jupyter writes its runtime token), so
 * `adv reconcile` run by the same user on the same machine needs no configuration. The token is
 * never logged; only where it came from is.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { open, readFile, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { AdvError, ErrorCode } from './errors.js';

/** The environment variable the controller and `adv reconcile` read the token from. */
export const API_TOKEN_ENV = 'ADV_API_TOKEN';
/** The file under the data dir a generated token is written to. */
export const API_TOKEN_FILE = 'api-token';
/** A token shorter than this is refused: it could be guessed over the network. */
const MIN_TOKEN_LENGTH = 16;

/**
 * Whether `given` is `token`. Both are hashed first, so the comparison is of two 32-byte digests:
 * its time depends neither on where they differ nor on how long `given` is.
 */
export function tokenMatches(token: string, given: string | undefined): boolean {
  if (given === undefined) return false;
  const want = createHash('sha256').update(token).digest();
  const got = createHash('sha256').update(given).digest();
  return timingSafeEqual(want, got);
}

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  return /^Bearer +(\S+) *$/i.exec(header ?? '')?.[1];
}

/**
 * The dashboard's session cookie value: derived from the token (HMAC), not the token itself, so a
 * cookie taken from a browser profile can read the dashboard but not drive the API.
 */
export function sessionCookieValue(token: string): string {
  return createHmac('sha256', token).update('adventuretime dashboard session').digest('hex');
}

/** A token read from `where`, checked: printable, no spaces, long enough to resist guessing. */
function checkToken(token: string, where: string, fix: string): string {
  if (/^[\x21-\x7e]+$/.test(token) && token.length >= MIN_TOKEN_LENGTH) return token;
  throw new AdvError(
    ErrorCode.UsageError,
    `the API token in ${where} must be at least ${MIN_TOKEN_LENGTH} printable characters without spaces`,
    { hint: fix },
  );
}

const MAKE_ONE = 'make one with: openssl rand -hex 32';

/**
 * The token in `file`, refused when the file is readable or writable by group or others (as ssh
 * refuses such a private key): a token everyone on the machine can read authenticates nobody.
 */
export async function readApiTokenFile(file: string): Promise<string> {
  const st = await stat(file).catch((e: NodeJS.ErrnoException) => {
    throw new AdvError(ErrorCode.UsageError, `--api-token-file ${file}: cannot read it (${e.code})`, {
      hint: `write the token to ${file} (${MAKE_ONE}) and chmod 600 ${file}`,
    });
  });
  if (!st.isFile())
    throw new AdvError(ErrorCode.UsageError, `--api-token-file ${file} is not a file`, {
      hint: `write the token to a file (${MAKE_ONE}) and chmod 600 it`,
    });
  if (st.mode & 0o077)
    throw new AdvError(
      ErrorCode.UsageError,
      `--api-token-file ${file} is readable or writable by group or others (mode ${(st.mode & 0o777).toString(8).padStart(4, '0')})`,
      { hint: `chmod 600 ${file}` },
    );
  return checkToken((await readFile(file, 'utf8')).trim(), file, MAKE_ONE);
}

/** A token the operator chose (`--api-token-file`, else `$ADV_API_TOKEN`), and where it came from. */
export async function configuredApiToken(
  file: string | undefined,
  env: NodeJS.ProcessEnv,
): Promise<{ token: string; from: string } | undefined> {
  if (file) return { token: await readApiTokenFile(file), from: file };
  const value = env[API_TOKEN_ENV];
  if (!value) return undefined;
  return { token: checkToken(value.trim(), `$${API_TOKEN_ENV}`, MAKE_ONE), from: `$${API_TOKEN_ENV}` };
}

/**
 * A fresh random token written to `<dataDir>/api-token` with mode 0600. It is written to a new
 * file and renamed over the old one, so the file is never readable by others, not even briefly,
 * whatever mode an earlier file had.
 */
export async function generateApiToken(dataDir: string): Promise<{ token: string; file: string }> {
  const token = randomBytes(32).toString('hex');
  const file = join(dataDir, API_TOKEN_FILE);
  const tmp = `${file}.${process.pid}.tmp`;
  await rm(tmp, { force: true });
  const fh = await open(tmp, 'wx', 0o600);
  try {
    await fh.writeFile(token + '\n');
  } finally {
    await fh.close();
  }
  await rename(tmp, file);
  return { token, file };
}
