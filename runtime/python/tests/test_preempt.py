"""The stop notice, in a child process that gets a real signal."""

import os
import signal
import time
import unittest

import support  # noqa: F401
from adventuretime.preempt import stop_signals

from support import SLOW, TempDir, child_env, finish, spawn

# Trains forever, one step per loop, handing each state to the manager; says "ready <step>" once
# it has taken a few steps past where it started. It never saves by itself: only the preemption save can write.
TRAIN_FOREVER = r"""
import os, sys, time
from adventuretime import CheckpointManager
m = CheckpointManager(save_on_preempt=True)
start = step = m.latest() or 0
while True:
    step += 1
    m.update({"step": step, "w": [step * 0.5]}, step)
    if step == start + 3:
        print("ready", flush=True)
        open(os.environ["READY"], "w").close()
    time.sleep(0.01)
"""

# Checks preempted() in its loop and stops itself; counts the handler's calls.
POLLING = r"""
import os, sys, time, signal
from adventuretime import on_preempt, preempted
calls = []
on_preempt(lambda: calls.append(1))
open(os.environ["READY"], "w").close()
deadline = time.monotonic() + 300
while not preempted():
    if time.monotonic() > deadline:
        sys.exit("no stop notice came")
    time.sleep(0.01)
os.kill(os.getpid(), signal.SIGTERM)  # a second notice runs nothing again
on_preempt(lambda: print("a handler added after the notice runs at once", flush=True))
print("stopped itself; handler calls:", len(calls), flush=True)
"""

# The stop notice comes while a checkpoint is being written (the state's pickling signals its
# own process): the handlers must wait for the save to finish rather than cut into it.
NOTICE_DURING_SAVE = r"""
import os, signal
from adventuretime import CheckpointManager, on_preempt
class State:
    def __getstate__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        return {"n": 1}
m = CheckpointManager(save_on_preempt=True)
on_preempt(lambda: print("handler sees step 1 finished:", m.latest() == 1, flush=True))
m.save(State(), 1)
print("save returned", flush=True)
"""


def wait_for_file(path, proc):
    deadline = time.monotonic() + SLOW
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise AssertionError(f"child exited ({proc.returncode}) before it was ready:\n{proc.stdout.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("child not ready in time")
        time.sleep(0.02)


class PreemptTest(unittest.TestCase):
    def test_the_stop_signal_saves_the_last_state_and_exits_as_stopped(self):
        from adventuretime import CheckpointManager, RunEnv

        with TempDir() as d:
            ckpt, ready = os.path.join(d, "ckpt"), os.path.join(d, "ready")
            proc = spawn(TRAIN_FOREVER, child_env(ADV_RUN="r", ADV_CKPT_DIR=ckpt, READY=ready))
            wait_for_file(ready, proc)
            proc.send_signal(signal.SIGTERM)
            code, out = finish(proc)
            self.assertEqual(code, 128 + signal.SIGTERM, out)
            m = CheckpointManager(env=RunEnv.from_env({"ADV_CKPT_DIR": ckpt}))
            self.assertIsNotNone(m.latest(), out)
            state = m.restore()
            self.assertGreaterEqual(state["step"], 3)
            self.assertEqual(state["step"], m.latest())
            self.assertEqual(state["w"], [state["step"] * 0.5])

    def test_the_next_attempt_resumes_from_the_preemption_save(self):
        with TempDir() as d:
            ckpt = os.path.join(d, "ckpt")
            steps = []
            for attempt in (1, 2):
                ready = os.path.join(d, f"ready{attempt}")
                proc = spawn(TRAIN_FOREVER, child_env(ADV_RUN="r", ADV_ATTEMPT=attempt, ADV_CKPT_DIR=ckpt, READY=ready))
                wait_for_file(ready, proc)
                proc.send_signal(signal.SIGTERM)
                code, out = finish(proc)
                self.assertEqual(code, 128 + signal.SIGTERM, out)
                steps.append(max(int(n) for n in os.listdir(ckpt) if n.isdigit()))
            self.assertGreater(steps[1], steps[0])

    def test_a_loop_that_checks_preempted_stops_itself_and_handlers_run_once(self):
        with TempDir() as d:
            ready = os.path.join(d, "ready")
            proc = spawn(POLLING, child_env(READY=ready))
            wait_for_file(ready, proc)
            proc.send_signal(signal.SIGTERM)
            code, out = finish(proc)
            self.assertEqual(code, 0, out)
            self.assertIn("handler calls: 1", out)
            self.assertIn("a handler added after the notice runs at once", out)

    def test_a_notice_during_a_save_waits_for_the_save(self):
        with TempDir() as d:
            ckpt = os.path.join(d, "ckpt")
            code, out = finish(spawn(NOTICE_DURING_SAVE, child_env(ADV_CKPT_DIR=ckpt)))
            self.assertEqual(code, 128 + signal.SIGTERM, out)
            self.assertIn("handler sees step 1 finished: True", out)
            self.assertNotIn("save returned", out)  # it exits as stopped, once the save is done
            self.assertEqual(sorted(os.listdir(os.path.join(ckpt, "1"))), ["COMMITTED", "state.pkl"])
            self.assertEqual(os.listdir(ckpt), ["1"])

    def test_adv_stop_signal_names_the_one_signal(self):
        with TempDir() as d:
            ready = os.path.join(d, "ready")
            proc = spawn(POLLING, child_env(READY=ready, ADV_STOP_SIGNAL="SIGUSR2"))
            wait_for_file(ready, proc)
            proc.send_signal(signal.SIGUSR2)
            code, out = finish(proc)
        # The second notice in the script is a SIGTERM, which is not the stop signal now: it kills.
        self.assertEqual(code, -signal.SIGTERM, out)
        self.assertEqual(stop_signals({"ADV_STOP_SIGNAL": "USR1"}), (signal.SIGUSR1,))
        self.assertEqual(stop_signals({}), (signal.SIGTERM, signal.SIGUSR1))
        with self.assertRaisesRegex(ValueError, "not a signal name"):
            stop_signals({"ADV_STOP_SIGNAL": "SIGNOPE"})


if __name__ == "__main__":
    unittest.main()
