"""log()'s lines, checked line by line against the fixture runtime/metrics.ts is checked against."""

import json
import os
import unittest
from unittest import mock

import support  # noqa: F401
from adventuretime import log
from gen_metric_lines import FIXTURE, line_for

from support import TempDir


class MetricLinesTest(unittest.TestCase):
    def test_log_writes_the_fixtures_lines(self):
        with open(FIXTURE, encoding="utf-8") as f:
            cases = json.load(f)
        self.assertGreaterEqual(len(cases), 8)
        for case in cases:
            with self.subTest(case["what"]):
                self.assertEqual(line_for(case), case["line"])

    def test_only_process_0_writes_and_nothing_without_the_variable(self):
        with TempDir() as d:
            path = os.path.join(d, "m.jsonl")
            with mock.patch.dict(os.environ, {"ADV_METRICS_FILE": path, "ADV_PROCESS_ID": "1"}):
                log(1, loss=0.5)
            self.assertFalse(os.path.exists(path))
            with mock.patch.dict(os.environ, {}, clear=True):
                log(1, loss=0.5)  # outside AdventureTime: a no-op, not an error
            with mock.patch.dict(os.environ, {"ADV_METRICS_FILE": path, "ADV_PROCESS_ID": "0"}):
                log(1, loss=0.5)
                log(2, loss=0.25)
            with open(path, encoding="utf-8") as f:
                self.assertEqual([json.loads(x)["step"] for x in f], [1, 2])

    def test_bad_input_is_refused(self):
        with TempDir() as d:
            with mock.patch.dict(os.environ, {"ADV_METRICS_FILE": os.path.join(d, "m"), "ADV_PROCESS_ID": "0"}):
                with self.assertRaisesRegex(ValueError, "negative"):
                    log(-1, loss=1.0)
                with self.assertRaisesRegex(TypeError, "metric 'loss'"):
                    log(1, loss="low")

    def test_jax_and_torch_scalars_are_numbers(self):
        import jax.numpy as jnp
        import torch

        with TempDir() as d:
            path = os.path.join(d, "m.jsonl")
            with mock.patch.dict(os.environ, {"ADV_METRICS_FILE": path, "ADV_PROCESS_ID": "0"}):
                log(jnp.int32(5), loss=jnp.float32(0.5), acc=torch.tensor(0.25))
            with open(path, encoding="utf-8") as f:
                self.assertEqual(json.loads(f.read())["metrics"], {"loss": 0.5, "acc": 0.25})


if __name__ == "__main__":
    unittest.main()
