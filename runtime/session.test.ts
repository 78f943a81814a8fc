/**
 * Sessions in adv exec: the idle rule, and a shell session held while a shell is attached, then
 * ended (exit 0, Completed) once none has been for its idle timeout.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { advExec, argvFor } from './exec.js';
import { parseSessionVar, SESSION_VAR, sessionKey, SHELLS_DIR, watchIdle, type Usage } from './session.js';
import { FileStore } from './store/file.js';

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-session-'));
});
afterAll(() => rm(tmp, { recursive: true, force: true }));

describe('watchIdle', () => {
  it('ends only after idleMs with no use, counting from the last use it saw or was told of', async () => {
    vi.useFakeTimers();
    try {
      let t = 0;
      const usage: Usage[] = [];
      let current: Usage = { ready: false, inUse: false };
      const onIdle = vi.fn();
      const onReady = vi.fn();
      watchIdle({
        probe: () => (usage.push(current), current),
        idleMs: 10_000,
        pollMs: 1_000,
        now: () => t,
        onReady,
        onIdle,
      });
      const step = async (ms: number) => {
        t += ms;
        await vi.advanceTimersByTimeAsync(ms);
      };
      await step(30_000); // not ready yet: never idle, however long
      expect(onIdle).not.toHaveBeenCalled();
      current = { ready: true, inUse: true };
      await step(1_000);
      expect(onReady).toHaveBeenCalledTimes(1);
      await step(20_000); // in use
      expect(onIdle).not.toHaveBeenCalled();
      current = { ready: true, inUse: false, lastActivity: t + 5_000 }; // activity reported later than now
      await step(12_000);
      expect(onIdle).not.toHaveBeenCalled();
      await step(5_000);
      expect(onIdle).toHaveBeenCalledTimes(1);
      const polls = usage.length;
      await step(10_000);
      expect(usage.length).toBe(polls); // stopped after ending
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('ADV_SESSION', () => {
  it('is checked, and a session run names no command of its own', () => {
    expect(parseSessionVar(undefined)).toBeUndefined();
    expect(parseSessionVar('{"kind":"notebook","idleTimeoutSec":60}')).toEqual({
      kind: 'notebook',
      idleTimeoutSec: 60,
    });
    expect(() => parseSessionVar('{"kind":"vnc"}')).toThrow(/"notebook" or "shell"/);
    expect(() => parseSessionVar('{"kind":"shell","idleTimeoutSec":-1}')).toThrow(/> 0/);
    expect(argvFor({ session: { kind: 'shell' } })).toEqual(['adv-session', 'shell']);
  });
});

describe('a shell session in adv exec', () => {
  it('holds the attempt while a shell is attached, then ends with exit 0 once idle', async () => {
    const jobDir = join(tmp, 'job');
    const store = new FileStore(join(tmp, 'store'));
    const shells = join(jobDir, SHELLS_DIR);
    mkdirSync(shells, { recursive: true });
    // An attached shell: a live process registered by its pid.
    const attached = spawn('sleep', ['300'], { stdio: 'ignore' });
    writeFileSync(join(shells, String(attached.pid)), '');
    const logs: string[] = [];
    const exec = advExec({
      run: 'shell-1',
      attempt: 1,
      argv: argvFor({ session: { kind: 'shell' } }),
      jobDir,
      store,
      graceSec: 5,
      heartbeatSec: 1,
      env: { [SESSION_VAR]: JSON.stringify({ kind: 'shell', idleTimeoutSec: 1 }) },
      log: (l) => logs.push(l),
    });
    let ended = false;
    void exec.then(() => (ended = true));
    // The endpoint is published while the shell holds it.
    await vi.waitFor(async () => expect(await store.get(sessionKey('shell-1'))).toBeDefined(), {
      timeout: 30_000,
      interval: 100,
    });
    const endpoint = JSON.parse(Buffer.from((await store.get(sessionKey('shell-1')))!).toString());
    expect(endpoint).toMatchObject({ run: 'shell-1', attempt: 1, kind: 'shell', jobDir, idleTimeoutSec: 1 });
    // Held: several idle timeouts pass with the shell attached (measured by the watcher's own polls).
    await vi.waitFor(() => expect(logs.join('\n')).toMatch(/session ready/), { timeout: 10_000 });
    await new Promise((r) => setTimeout(r, 3_000));
    expect(ended).toBe(false);
    attached.kill('SIGKILL');
    const { code, record } = await exec;
    expect(code).toBe(0);
    expect(record).toMatchObject({ reason: 'Completed', exitCode: 0 });
    expect(record.message).toMatch(/session ended: the session was unused for \d+ s \(idleTimeoutSec 1\)/);
    // Over: the endpoint is gone, so no client reaches for a session that is not there.
    expect(await store.get(sessionKey('shell-1'))).toBeUndefined();
  }, 60_000);
});
