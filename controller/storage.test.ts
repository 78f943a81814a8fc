import { describe, expect, it } from 'vitest';
import { storeTarget, urlStoreTarget } from './storage.js';

describe('the store a job is given', () => {
  it('a Storage spec: its URL, and the credentials it names from the environment', () => {
    const t = storeTarget(
      { type: 's3', s3: { bucket: 'b', prefix: '/p/', region: 'r', credentialsSecret: 'LAB' } },
      '/data',
      { LAB_ACCESS_KEY_ID: 'id', AWS_ACCESS_KEY_ID: 'other' },
    );
    expect(t).toEqual({
      url: 's3://b/p?region=r&credentials=LAB',
      env: { LAB_ACCESS_KEY_ID: 'id' },
      missing: ['LAB_SECRET_ACCESS_KEY'],
    });
    expect(storeTarget({ type: 'file' }, '/data').url).toBe('file:///data/store');
  });

  it('a URL (--store, ADV_STORE): the credentials its query names, else the AWS SDK variables that are set', () => {
    const env = { LAB_ACCESS_KEY_ID: 'id', LAB_SECRET_ACCESS_KEY: 's', AWS_ACCESS_KEY_ID: 'a', HOME: '/h' };
    expect(urlStoreTarget('s3://b/p?credentials=LAB', env)).toEqual({
      url: 's3://b/p?credentials=LAB',
      env: { LAB_ACCESS_KEY_ID: 'id', LAB_SECRET_ACCESS_KEY: 's' },
      missing: [],
    });
    expect(urlStoreTarget('s3://b/p', env)).toEqual({
      url: 's3://b/p',
      env: { AWS_ACCESS_KEY_ID: 'a' },
      missing: [],
    });
    expect(urlStoreTarget('s3://b/p?credentials=NOPE', {}).missing).toEqual([
      'NOPE_ACCESS_KEY_ID',
      'NOPE_SECRET_ACCESS_KEY',
    ]);
    expect(urlStoreTarget('file:///tmp/s', env)).toEqual({ url: 'file:///tmp/s', env: {}, missing: [] });
  });
});
