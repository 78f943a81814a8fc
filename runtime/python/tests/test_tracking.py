"""tracking_id and wandb_init, with the real wandb in offline mode."""

import glob
import os
import unittest

import support  # noqa: F401
from adventuretime import tracking_id

from support import TempDir, child_env, finish, spawn

WANDB_JOB = r"""
import os
from adventuretime import wandb_init
run = wandb_init(project="adv-test")
run.log({"loss": 0.5})
print("id", run.id, "name", run.name, flush=True)
run.finish()
"""


class TrackingTest(unittest.TestCase):
    def test_tracking_id_comes_from_the_contract(self):
        self.assertEqual(tracking_id({"ADV_TRACKING_ID": "r-1a2b"}), "r-1a2b")
        self.assertEqual(tracking_id({"WANDB_RUN_ID": "w"}), "w")
        self.assertIsNone(tracking_id({}))

    def test_wandb_init_uses_the_runs_id_even_when_wandb_does_not_read_it(self):
        with TempDir() as d:
            # Only ADV_TRACKING_ID: wandb alone would make up a new id for every attempt.
            env = child_env(ADV_RUN="train-3", ADV_TRACKING_ID="train3abc", WANDB_MODE="offline", WANDB_DIR=d,
                            WANDB_SILENT="true", HOME=d)
            code, out = finish(spawn(WANDB_JOB, env, cwd=d))
            self.assertEqual(code, 0, out)
            self.assertIn("id train3abc name train-3", out)
            self.assertEqual(len(glob.glob(os.path.join(d, "wandb", "offline-run-*-train3abc"))), 1, out)


if __name__ == "__main__":
    unittest.main()
