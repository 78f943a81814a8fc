"""Save/restore round trips in every format, with the real Orbax/JAX and torch of the venv."""

import os
import unittest

import support  # noqa: F401
from adventuretime import CheckpointManager, RunEnv
from adventuretime import layout
from adventuretime.checkpoint import DCP, JSON, ORBAX, PICKLE, TORCH, format_on_disk

from support import REPO, TempDir


def local_env(ckpt):
    return RunEnv.from_env({"ADV_CKPT_DIR": ckpt})


def second_of_two(ckpt, mode):
    """Process 1 of a 2-process job with no framework up (no barrier to meet at)."""
    return RunEnv.from_env(
        {"ADV_CKPT_DIR": ckpt, "ADV_PROCESS_ID": "1", "ADV_NUM_PROCESSES": "2",
         "ADV_COORDINATOR_ADDRESS": "127.0.0.1:1", "ADV_CKPT_MODE": mode}
    )


class LayoutTest(unittest.TestCase):
    def test_markers_are_the_ones_adv_exec_watches_for(self):
        with open(os.path.join(REPO, "runtime", "checkpoint.ts"), encoding="utf-8") as f:
            ts = f.read()
        self.assertIn(f"COMMITTED_MARKER = '{layout.COMMITTED_MARKER}'", ts)
        self.assertIn(f"ORBAX_COMMIT_MARKER = '{layout.ORBAX_COMMIT_MARKER}'", ts)
        self.assertIn("isStepName = (name: string): boolean => /^\\d{1,18}$/", ts)
        self.assertTrue(layout.is_step_name("123") and not layout.is_step_name(".123.tmp-ab"))


class PlainTest(unittest.TestCase):
    def test_json_round_trip_latest_and_the_layout(self):
        with TempDir() as d:
            m = CheckpointManager(d, env=local_env(d))
            self.assertIsNone(m.latest())
            self.assertTrue(m.save({"step": 5, "lr": [0.1, 0.01]}, 5))
            self.assertTrue(m.save({"step": 10, "lr": [0.2]}, 10))
            self.assertEqual(m.steps(), [5, 10])
            self.assertEqual(m.latest(), 10)
            self.assertEqual(m.restore(), {"step": 10, "lr": [0.2]})
            self.assertEqual(m.restore(step=5), {"step": 5, "lr": [0.1, 0.01]})
            self.assertEqual(sorted(os.listdir(os.path.join(d, "10"))), ["COMMITTED", "state.json"])
            # Nothing but the finished steps is left: the tmp dirs were renamed, not copied.
            self.assertEqual(sorted(os.listdir(d)), ["10", "5"])
            self.assertEqual(format_on_disk(os.path.join(d, "10")), JSON)

    def test_pickle_for_what_json_cannot_hold(self):
        with TempDir() as d:
            m = CheckpointManager(d, env=local_env(d))
            m.save({"seen": {1, 2}, "t": (1, 2)}, 3)
            self.assertEqual(format_on_disk(os.path.join(d, "3")), PICKLE)
            self.assertEqual(m.restore(), {"seen": {1, 2}, "t": (1, 2)})

    def test_unfinished_steps_are_not_checkpoints(self):
        with TempDir() as d:
            m = CheckpointManager(d, env=local_env(d))
            m.save([1], 1)
            os.makedirs(os.path.join(d, "2"))  # a save killed before its marker
            with open(os.path.join(d, "2", "state.json"), "w") as f:
                f.write("[2")
            self.assertEqual(m.latest(), 1)
            with self.assertRaisesRegex(FileNotFoundError, "not a finished checkpoint"):
                m.restore(step=2)
            # Saving that step again replaces the leftover.
            self.assertTrue(m.save([2], 2))
            self.assertEqual(m.restore(), [2])

    def test_a_finished_step_is_not_overwritten(self):
        with TempDir() as d:
            m = CheckpointManager(d, env=local_env(d))
            self.assertTrue(m.save("first", 4))
            self.assertFalse(m.save("second", 4))
            self.assertEqual(m.restore(), "first")

    def test_keep_prunes_the_oldest_finished_steps(self):
        with TempDir() as d:
            m = CheckpointManager(d, keep=2, env=local_env(d))
            for s in (1, 2, 3, 4):
                m.save(s, s)
            self.assertEqual(m.steps(), [3, 4])
            with self.assertRaisesRegex(ValueError, "keep at least 1"):
                CheckpointManager(d, keep=0, env=local_env(d))

    def test_restore_with_nothing_there_says_where_it_looked(self):
        with TempDir() as d:
            with self.assertRaises(FileNotFoundError) as c:
                CheckpointManager(d, env=local_env(d)).restore()
            self.assertIn(d, str(c.exception))

    def test_the_default_dir_is_the_contracts(self):
        with TempDir() as d:
            m = CheckpointManager(env=RunEnv.from_env({"ADV_RUN": "r", "ADV_CKPT_DIR": d}))
            m.save({"a": 1}, 7)
            self.assertTrue(os.path.exists(os.path.join(d, "7", "COMMITTED")))
            self.assertEqual(RunEnv.from_env({"ADV_CKPT_DIR": d}).restored_step, 7)

    def test_non_primary_processes_of_a_shared_dir_write_nothing(self):
        with TempDir() as d:
            CheckpointManager(d, env=second_of_two(d, "shared")).save({"a": 1}, 3)
            self.assertEqual(os.listdir(d), [])

    def test_non_primary_processes_finish_their_own_dir_with_the_marker_only(self):
        # Per-process dirs: the gang commit waits for every process's part of the step.
        with TempDir() as d:
            CheckpointManager(d, env=second_of_two(d, "per-process")).save({"a": 1}, 3)
            self.assertEqual(os.listdir(d), ["3"])
            self.assertEqual(os.listdir(os.path.join(d, "3")), ["COMMITTED"])


class OrbaxTest(unittest.TestCase):
    def test_a_jax_pytree_round_trips_through_orbax(self):
        import jax.numpy as jnp
        import numpy as np

        with TempDir() as d:
            m = CheckpointManager(d, keep=2, env=local_env(d))
            for s in (10, 20, 30):
                m.save({"w": jnp.arange(8.0) * s, "opt": {"mu": jnp.ones((2, 2)) * s}}, s)
            m.wait()
            self.assertEqual(m.steps(), [20, 30])
            self.assertEqual(format_on_disk(os.path.join(d, "30")), ORBAX)
            self.assertTrue(os.path.exists(os.path.join(d, "30", "COMMITTED")))
            self.assertEqual([n for n in os.listdir(d) if not layout.is_step_name(n)], [])
            out = m.restore({"w": jnp.zeros(8), "opt": {"mu": jnp.zeros((2, 2))}})
            np.testing.assert_array_equal(np.asarray(out["w"]), np.arange(8.0) * 30)
            np.testing.assert_array_equal(np.asarray(out["opt"]["mu"]), np.ones((2, 2)) * 30)
            old = m.restore(step=20)
            np.testing.assert_array_equal(np.asarray(old["w"]), np.arange(8.0) * 20)
            m.close()

    def test_a_save_is_committed_only_once_orbax_has_finished(self):
        import jax.numpy as jnp

        with TempDir() as d:
            m = CheckpointManager(d, env=local_env(d))
            m.save({"w": jnp.ones(1024)}, 1)
            # Until wait(), the step is not under its final name: adv exec never sees half of it.
            self.assertFalse(os.path.exists(os.path.join(d, "1")))
            m.wait()
            self.assertEqual(m.latest(), 1)
            m.close()


    def test_store_mode_writes_through_orbax_to_the_uri(self):
        # ADV_CKPT_URI as a plain path: the same code as s3:// or gs:// (etils' epath) with a
        # filesystem every machine has; the step is Orbax's, committed by commit_success.txt.
        import jax.numpy as jnp
        import numpy as np

        with TempDir() as d:
            uri = os.path.join(d, "store", "runs", "r", "ckpt")
            env = RunEnv.from_env({"ADV_CKPT_DIR": os.path.join(d, "local"), "ADV_CKPT_URI": uri, "ADV_CKPT_MODE": "store"})
            m = CheckpointManager(env=env)
            self.assertEqual(m.remote, uri)
            self.assertIsNone(m.latest())
            self.assertTrue(m.save({"w": jnp.arange(3.0)}, 4))
            m.wait()
            self.assertEqual(m.latest(), 4)
            self.assertTrue(os.path.exists(os.path.join(uri, "4", layout.ORBAX_COMMIT_MARKER)))
            self.assertFalse(m.save({"w": jnp.arange(3.0)}, 4))
            np.testing.assert_array_equal(np.asarray(m.restore({"w": jnp.zeros(3)})["w"]), np.arange(3.0))
            with self.assertRaisesRegex(ValueError, "only Orbax can do"):
                m.save({"plain": 1}, 5)
            m.close()


class TorchTest(unittest.TestCase):
    def test_a_module_and_a_state_dict_round_trip_through_torch_save(self):
        import torch

        torch.manual_seed(0)
        with TempDir() as d:
            m = CheckpointManager(d, env=local_env(d))
            net = torch.nn.Linear(3, 2)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            m.save(net, 1)
            m.save({"model": net.state_dict(), "opt": opt.state_dict(), "step": 2}, 2)
            self.assertEqual(format_on_disk(os.path.join(d, "1")), TORCH)
            fresh = torch.nn.Linear(3, 2)
            self.assertIs(m.restore(fresh, step=1), fresh)
            self.assertTrue(torch.equal(fresh.weight, net.weight))
            state = m.restore()
            self.assertEqual(state["step"], 2)
            self.assertTrue(torch.equal(state["model"]["bias"], net.bias))


if __name__ == "__main__":
    unittest.main()
