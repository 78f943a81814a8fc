import { describe, expect, it } from 'vitest';
import { isAdvError } from './errors.js';
import { checkSelector, parseSelector, selectorMatches } from './selector.js';

const labels = { team: 'ml', size: 'small', 'example.com/tier': 'gold' };
const matches = (s: string) => selectorMatches(labels, parseSelector(s));

describe('label selectors (kubectl equality-based syntax)', () => {
  it('keeps what worked: key=value, key, and several separated by commas', () => {
    expect(matches('team=ml')).toBe(true);
    expect(matches('team=other')).toBe(false);
    expect(matches('team')).toBe(true);
    expect(matches('bad')).toBe(false);
    expect(matches('team=ml,size=small')).toBe(true);
    expect(matches('team=ml,size=big')).toBe(false);
    expect(matches('')).toBe(true);
    expect(selectorMatches(undefined, parseSelector('team'))).toBe(false);
  });

  it('reads ==, != and !key as kubectl does, with prefixed keys and spaces around operators', () => {
    expect(matches('team==ml')).toBe(true);
    expect(matches('team!=ml')).toBe(false);
    expect(matches('owner!=me')).toBe(true);
    expect(matches('!owner')).toBe(true);
    expect(matches('!team')).toBe(false);
    expect(matches('example.com/tier=gold, size = small')).toBe(true);
    expect(matches('team=')).toBe(false);
  });

  it('refuses what does not parse, naming the requirement', () => {
    for (const [selector, bad, why] of [
      ['team=a=b', 'team=a=b', 'the value "a=b" is not a label value'],
      ['team=ml,', '', 'it is empty'],
      ['=x', '=x', 'no key'],
      ['Team Name=x', 'Team Name=x', 'the key "Team Name" is not a label key'],
      ['tier in (a,b),team=ml', 'tier in (a,b)', 'set-based requirements (in, notin) are not supported'],
      ['Bad_Prefix/x=y', 'Bad_Prefix/x=y', 'the key prefix "Bad_Prefix" is not a DNS-1123 subdomain'],
      ['a\u001b[2J=b', 'a\\u001b[2J=b', 'is not a label key'],
    ]) {
      let err: unknown;
      try {
        parseSelector(selector!);
      } catch (e) {
        err = e;
      }
      expect(isAdvError(err), selector).toBe(true);
      const message = (err as Error).message;
      expect(message).toContain(`requirement "${bad}"`);
      expect(message).toContain(why);
      expect(message).not.toContain('\u001b');
    }
  });
});

describe('checkSelector', () => {
  it('returns the requirements, or the first bad requirement and what is wrong with it', () => {
    expect(checkSelector('team=ml,!gpu')).toEqual([
      { key: 'team', op: 'equals', value: 'ml' },
      { key: 'gpu', op: 'notExists' },
    ]);
    expect(checkSelector('team=ml, env in (a,b)')).toEqual({
      requirement: 'env in (a,b)',
      problem: 'set-based requirements (in, notin) are not supported',
    });
  });
});
