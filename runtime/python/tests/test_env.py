import os
import unittest

import support  # noqa: F401  (puts the package on sys.path)
from adventuretime import ContractError, RunEnv
from adventuretime.layout import write_marker

from support import TempDir


class RunEnvTest(unittest.TestCase):
    def test_outside_adventuretime_the_defaults_run_on_a_laptop(self):
        e = RunEnv.from_env({})
        self.assertEqual((e.run, e.attempt, e.process_id, e.num_processes), ("local", 1, 0, 1))
        self.assertEqual(e.ckpt_dir, os.path.abspath("checkpoints"))
        self.assertEqual(e.artifact_dir, os.path.abspath("artifacts"))
        self.assertTrue(e.is_primary)
        self.assertFalse(e.managed)
        self.assertFalse(e.distributed)
        self.assertIsNone(e.backend)

    def test_the_whole_contract_is_read(self):
        with TempDir() as d:
            ckpt = os.path.join(d, "ckpt")
            for step, done in ((10, True), (20, True), (30, False)):
                os.makedirs(os.path.join(ckpt, str(step)))
                if done:
                    write_marker(os.path.join(ckpt, str(step)))
            os.makedirs(os.path.join(ckpt, ".40.tmp-x"))
            env = {
                "ADV_RUN": "train-7",
                "ADV_ATTEMPT": "3",
                "ADV_PROCESS_ID": "1",
                "ADV_NUM_PROCESSES": "4",
                "ADV_LOCAL_PROCESS_ID": "1",
                "ADV_LOCAL_PROCESS_COUNT": "2",
                "ADV_LOCAL_DEVICE_COUNT": "4",
                "ADV_COORDINATOR_ADDRESS": "10.0.0.1:8476",
                "ADV_CKPT_DIR": ckpt,
                "ADV_CKPT_URI": "s3://bucket/runs/train-7/ckpt/",
                "ADV_CKPT_MODE": "store",
                "ADV_ARTIFACT_DIR": os.path.join(d, "art"),
                "ADV_JOB_DIR": d,
                "ADV_CACHE_DIR": "/cache",
                "ADV_BACKEND": "slurm-a",
                "ADV_METRICS_FILE": os.path.join(d, "metrics.jsonl"),
                "ADV_STOP_SIGNAL": "SIGUSR1",
                "ADV_TRACKING_ID": "train-7-abc",
                "ADV_INPUTS": '{"tokens": {"run": "p.tok", "output": "shards"}}',
                "ADV_INPUT_tokens_DIR": os.path.join(d, "inputs", "tokens"),
                "ADV_OUTPUTS": "params,report",
            }
            e = RunEnv.from_env(env)
        self.assertEqual((e.run, e.attempt), ("train-7", 3))
        self.assertEqual((e.process_id, e.num_processes, e.local_process_id, e.local_process_count), (1, 4, 1, 2))
        self.assertEqual(e.local_device_count, 4)
        self.assertEqual(e.coordinator_address, "10.0.0.1:8476")
        self.assertEqual((e.ckpt_dir, e.ckpt_uri, e.ckpt_mode), (ckpt, "s3://bucket/runs/train-7/ckpt/", "store"))
        self.assertEqual((e.job_dir, e.cache_dir, e.backend), (d, "/cache", "slurm-a"))
        self.assertEqual((e.stop_signal, e.tracking_id), ("SIGUSR1", "train-7-abc"))
        self.assertEqual(e.inputs, {"tokens": os.path.join(d, "inputs", "tokens")})
        self.assertEqual(e.outputs, {n: os.path.join(d, "art", n) for n in ("params", "report")})
        # 30 has no marker, .40.tmp-x is not a step: 20 is what the attempt starts from.
        self.assertEqual(e.restored_step, 20)
        self.assertTrue(e.resumed)
        self.assertFalse(e.is_primary)
        self.assertTrue(e.managed)

    def test_torch_and_jax_variables_stand_in_for_the_adv_ones(self):
        e = RunEnv.from_env({"RANK": "2", "WORLD_SIZE": "3", "JAX_COORDINATOR_ADDRESS": "h:1"})
        self.assertEqual((e.process_id, e.num_processes, e.coordinator_address), (2, 3, "h:1"))

    def test_nonsense_is_refused_with_the_variable_named(self):
        cases = [
            ({"ADV_ATTEMPT": "two"}, "$ADV_ATTEMPT is 'two'"),
            ({"ADV_ATTEMPT": "0"}, "$ADV_ATTEMPT is 0; it must be >= 1"),
            ({"ADV_PROCESS_ID": "2", "ADV_NUM_PROCESSES": "2", "ADV_COORDINATOR_ADDRESS": "h:1"}, "not below"),
            ({"ADV_NUM_PROCESSES": "2"}, "needs $ADV_COORDINATOR_ADDRESS"),
            ({"ADV_INPUTS": "[oops"}, "$ADV_INPUTS is not a JSON object"),
        ]
        for env, message in cases:
            with self.subTest(env=env):
                with self.assertRaises(ContractError) as c:
                    RunEnv.from_env(env)
                self.assertIn(message, str(c.exception))

    def test_restored_step_is_what_was_there_when_the_process_first_read_it(self):
        from unittest import mock

        from adventuretime import CheckpointManager

        with TempDir() as d:
            os.makedirs(os.path.join(d, "5"))
            write_marker(os.path.join(d, "5"))
            with mock.patch.dict(os.environ, {"ADV_RUN": "r", "ADV_CKPT_DIR": d}):
                self.assertEqual(RunEnv.from_env().restored_step, 5)
                CheckpointManager().save({"a": 1}, 10)
                self.assertEqual(RunEnv.from_env().restored_step, 5)

    def test_a_fresh_attempt_is_not_resumed(self):
        with TempDir() as d:
            e = RunEnv.from_env({"ADV_RUN": "r", "ADV_CKPT_DIR": d})
        self.assertIsNone(e.restored_step)
        self.assertFalse(e.resumed)


if __name__ == "__main__":
    unittest.main()
