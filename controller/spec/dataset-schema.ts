/**
 * The schema parts of Datasets and of a Run's `inputs` (`schema.ts` wraps them into the kind),
 * apart so that `schema.ts` stays one readable file.
 */
import { Type } from '@sinclair/typebox';
import { DNS1123_LABEL, DNS1123_SUBDOMAIN, ENV_NAME, optional, strict, StringEnum } from './schema-kit.js';

/**
 * A reference to a Dataset from a Run's `inputs`: its name (a DNS label), optionally pinned to a
 * version with `@N`. Captures the name and the version (the grammar of an Environment reference).
 */
export const DATASET_REF = '^([a-z0-9]([-a-z0-9]*[a-z0-9])?)(@([1-9][0-9]{0,8}))?$';

/** `as` of a Run input: the directory under `<job dir>/inputs/` and `ADV_INPUT_<as>_DIR`. */
export const INPUT_AS = ENV_NAME;

/** A Run's `inputs`. */
export const RunInputsSchema = Type.Array(
  strict(
    {
      dataset: Type.String({
        maxLength: 80,
        pattern: DATASET_REF,
        description:
          'The Dataset: `tokens` (its newest version, so a new version is a change of the run) or `tokens@2` (that version).',
        'x-hint': 'write a Dataset name, optionally with a version: "tokens" or "tokens@2"',
      }),
      as: Type.String({
        maxLength: 64,
        pattern: INPUT_AS,
        description:
          '`adv exec` materialises the dataset into `<job dir>/inputs/<as>/` before the command starts and sets `ADV_INPUT_<as>_DIR`. Unique per run.',
        'x-hint': 'write a name of letters, digits and "_" that does not start with a digit, e.g. "train"',
      }),
    },
    'One dataset the run reads.',
  ),
  {
    maxItems: 64,
    description:
      'Datasets the run reads, fetched through the host cache into the job dir before the command starts (docs/data.md).',
  },
);

/** A Dataset's name: a DNS label, so that `name@version` is never ambiguous. */
export const datasetNameField = Type.String({
  minLength: 1,
  maxLength: 63,
  pattern: DNS1123_LABEL,
  description:
    "Name of the Dataset: a DNS-1123 label of at most 63 characters (lowercase letters, digits and '-'). Several documents may share it with different `spec.version`s.",
  'x-hint': 'use lowercase letters, digits and \'-\' (no dots), at most 63 characters (e.g. "tokens")',
});

export const SHA256_DIGEST = '^sha256:[0-9a-f]{64}$';

const OUTPUT_NAME = '^[A-Za-z_][A-Za-z0-9_-]*$';

export const DatasetSourceSchema = strict(
  {
    store: optional(
      strict(
        {
          prefix: Type.String({
            minLength: 1,
            maxLength: 1024,
            pattern: '^[^/\\s][^\\s]*/$',
            description:
              "A prefix of the repo's Storage (relative to its root, ending in `/`) holding a `manifest.json` (a DatasetManifest, as `adv dataset push` writes) and the files it lists.",
            'x-hint': 'write a prefix relative to the store, ending in "/", e.g. "datasets/tokens/3f2a…/"',
          }),
        },
        'Files under a prefix of the object store, listed by its manifest.',
      ),
    ),
    urls: optional(
      Type.Array(
        strict(
          {
            url: Type.String({
              maxLength: 4096,
              pattern: '^(https|s3)://[^\\s]+$',
              description: "Where the file is: `https://…`, or `s3://bucket/key` of the repo's Storage.",
              'x-hint': 'write an https:// or s3:// URL',
            }),
            sha256: Type.String({
              pattern: '^[0-9a-f]{64}$',
              description: 'Hex sha256 of the file: the fetched bytes must have it.',
              'x-hint': 'write the 64 lowercase hex digits of `sha256sum FILE`',
            }),
            path: optional(
              Type.String({
                minLength: 1,
                maxLength: 1024,
                description:
                  "Where the file goes in the dataset, `/`-separated, relative (no `..`). Default: the URL's last path segment.",
              }),
            ),
            size: optional(
              Type.Integer({ minimum: 0, description: 'Size in bytes, when known (for progress).' }),
            ),
          },
          'One file by URL.',
        ),
        { minItems: 1, maxItems: 100000, description: 'Files fetched by URL, each with its sha256.' },
      ),
    ),
    output: optional(
      strict(
        {
          run: optional(
            Type.String({
              minLength: 1,
              maxLength: 63,
              pattern: DNS1123_SUBDOMAIN,
              description: 'A Run whose output this is.',
            }),
          ),
          dag: optional(
            Type.String({ minLength: 1, maxLength: 253, pattern: DNS1123_SUBDOMAIN, description: 'A DAG.' }),
          ),
          node: optional(
            Type.String({
              minLength: 1,
              maxLength: 63,
              pattern: DNS1123_LABEL,
              description: 'A node of `dag`.',
            }),
          ),
          output: Type.String({
            minLength: 1,
            maxLength: 128,
            pattern: OUTPUT_NAME,
            description: "The output's name, as the run or node declares it.",
          }),
        },
        'The completed output of a Run (`run`, `output`) or of a DAG node (`dag`, `node`, `output`).',
      ),
    ),
  },
  'Where the bytes come from: exactly one of `store`, `urls` and `output`.',
);

export const DatasetSpecSchema = strict(
  {
    version: Type.Integer({
      minimum: 1,
      maximum: 999999999,
      description:
        'The version, unique per name. Keep old versions in the repo: runs pinned to `name@N` keep using them; runs naming `name` alone take the highest.',
    }),
    description: optional(Type.String({ maxLength: 4096, description: 'What the dataset holds.' })),
    digest: optional(
      Type.String({
        pattern: SHA256_DIGEST,
        description:
          "`sha256:<hex>` content hash of the dataset's manifest (`adv dataset push` pins it): the fetched content must have it.",
        'x-hint': 'write "sha256:" and 64 lowercase hex digits, as `adv dataset push` prints',
      }),
    ),
    source: DatasetSourceSchema,
  },
  'A named, versioned, content-addressed set of files a Run reads.',
);

/** A Backend's `datasetCache`: the host cache `adv exec` materialises inputs through. */
export const DatasetCacheSchema = strict(
  {
    maxGiB: optional(
      Type.Number({
        exclusiveMinimum: 0,
        description:
          'The bound of the host dataset cache (`<cache dir>/datasets`, shared by every job on the host): least recently used files go first. Default 100.',
      }),
    ),
    verify: optional(
      StringEnum(
        ['stat', 'full'] as const,
        'How a cached file is checked before a job uses it: `stat` (default) hashes it again only when its size, mtime or inode changed; `full` hashes it on every use.',
      ),
    ),
  },
  "The host cache `adv exec` materialises a run's `inputs` through (docs/data.md).",
);
