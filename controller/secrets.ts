/**
 * Where the secrets Run specs name (`spec.secrets: [NAME…]`) come from. The controller looks in
 * this order and the first that has the name wins:
 *
 *   1. `--secrets-file FILE`: dotenv `NAME=value` lines (read with `dotenv`'s parser: quotes,
 *      `export`, comments, multi-line double-quoted values). Refused at start when group or others
 *      may read or write it, as ssh refuses such a key; re-read when it changes, so a secret added
 *      later is found by `adv reconcile run NAME` without a restart.
 *   2. `--secrets-dir DIR`: one file per secret, named by the secret, its whole content the value
 *      (no newline trimmed), the way Kubernetes mounts a Secret (`..data` symlinks followed).
 *   3. the controller's own environment, for the names `--secrets-env` lists, and only those.
 *
 * A spec never names the controller's own credentials: `ADV_*` is refused when the spec is
 * validated, and the store's credential variables when a job is built (`reservedSecretNames`).
 */
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseDotenv } from 'dotenv';
import { AdvError, ErrorCode } from './errors.js';
import { ENV_NAME } from './spec/schema-kit.js';

const ENV_NAME_RE = new RegExp(ENV_NAME);

/** Where the controller resolves the secrets specs name. */
export interface SecretSource {
  get(name: string): string | undefined;
  /** Where it looks, for the message when a secret is missing. */
  readonly where: string;
}

export interface SecretSourcesOptions {
  /** A dotenv file (mode 0600 or stricter). */
  file?: string | undefined;
  /** A directory with one file per secret. */
  dir?: string | undefined;
  /** Names the controller may pass on from its own environment. */
  env?: readonly string[] | undefined;
}

/** Names no spec may ask for: the controller's own settings and credentials. */
export const RESERVED_SECRET_PREFIX = 'ADV_';

function configError(message: string, hint: string): AdvError {
  return new AdvError(ErrorCode.UsageError, message, { hint });
}

/** Throws when the secrets file is missing, not a file, or open to group or others. */
function checkSecretsFile(file: string): { mtimeMs: number; size: number } {
  let st;
  try {
    st = statSync(file);
  } catch (e) {
    throw configError(
      `--secrets-file ${file}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (e as Error).message}`,
      'create it with NAME=value lines and chmod 600, or drop --secrets-file',
    );
  }
  if (!st.isFile()) throw configError(`--secrets-file ${file} is not a file`, 'point it at a dotenv file');
  if (st.mode & 0o077)
    throw configError(
      `--secrets-file ${file} may be read or written by group or others (mode ${(st.mode & 0o777).toString(8)})`,
      `chmod 600 ${file}`,
    );
  return { mtimeMs: st.mtimeMs, size: st.size };
}

/** The secret sources of a controller, in order (see the module comment). */
export class SecretSources implements SecretSource {
  readonly where: string;
  private fileValues: Record<string, string> = {};
  private fileStamp = '';
  private readonly envNames: ReadonlySet<string>;

  /** Checks the options at once: a bad file or dir is a usage error before anything starts. */
  constructor(
    private readonly opts: SecretSourcesOptions,
    private readonly env: NodeJS.ProcessEnv,
  ) {
    for (const n of opts.env ?? []) {
      if (!ENV_NAME_RE.test(n))
        throw configError(`--secrets-env "${n}" is not a variable name`, 'list names like WANDB_API_KEY');
      if (n.startsWith(RESERVED_SECRET_PREFIX))
        throw configError(
          `--secrets-env ${n}: ADV_* variables are the controller's own settings and credentials`,
          'pass a job its own credential under another name',
        );
    }
    this.envNames = new Set(opts.env ?? []);
    if (opts.file) this.readFile();
    if (opts.dir) {
      let isDir = false;
      try {
        isDir = statSync(opts.dir).isDirectory();
      } catch {
        isDir = false;
      }
      if (!isDir)
        throw configError(`--secrets-dir ${opts.dir} is not a directory`, 'create it, or drop --secrets-dir');
    }
    const places = [
      ...(opts.file ? [`--secrets-file ${opts.file}`] : []),
      ...(opts.dir ? [`--secrets-dir ${opts.dir}`] : []),
      ...(this.envNames.size
        ? [`the controller's environment (--secrets-env ${[...this.envNames].join(',')})`]
        : []),
    ];
    this.where = places.length
      ? places.join(', ')
      : 'no source (the controller was started without --secrets-file, --secrets-dir or --secrets-env)';
  }

  get(name: string): string | undefined {
    if (!ENV_NAME_RE.test(name) || name.startsWith(RESERVED_SECRET_PREFIX)) return undefined;
    if (this.opts.file) {
      this.refreshFile();
      if (Object.hasOwn(this.fileValues, name)) return this.fileValues[name];
    }
    if (this.opts.dir) {
      try {
        return readFileSync(join(this.opts.dir, name), 'utf8');
      } catch {
        // not there: the next source
      }
    }
    return this.envNames.has(name) ? this.env[name] : undefined;
  }

  private readFile(): void {
    const st = checkSecretsFile(this.opts.file!);
    this.fileValues = parseDotenv(readFileSync(this.opts.file!));
    this.fileStamp = `${st.mtimeMs}:${st.size}`;
  }

  /** Re-reads the file when it changed; a file made unsafe since keeps the values read before. */
  private refreshFile(): void {
    try {
      const st = statSync(this.opts.file!);
      if (`${st.mtimeMs}:${st.size}` !== this.fileStamp) this.readFile();
    } catch {
      // gone or unsafe now: what was read stays (the controller's log says nothing of values)
    }
  }
}
