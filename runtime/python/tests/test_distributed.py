"""init_distributed from the contract, and the CheckpointManager across processes, with real JAX
(CPU, gloo collectives over loopback) and torch (gloo)."""

import os
import unittest

import support  # noqa: F401
from adventuretime import RunEnv, init_distributed

from support import TempDir, child_env, finish, free_port, spawn

# Each process: init from the contract, a pytree sharded over both processes' devices, saved by
# the CheckpointManager into one shared dir (Orbax writes every process's shards, process 0
# finalizes, the manager commits), restored, and compared on every process.
JAX_JOB = r"""
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jax.experimental import multihost_utils
from adventuretime import CheckpointManager, RunEnv, init_distributed
print("framework", init_distributed("jax"), flush=True)
env = RunEnv.from_env()
assert jax.process_count() == 2 and jax.process_index() == env.process_id, (jax.process_count(), jax.process_index())
sh = NamedSharding(Mesh(np.array(jax.devices()).reshape(2, 2), ("data", "model")), P("data", "model"))
w = jax.make_array_from_callback((8, 8), sh, lambda idx: np.arange(64, dtype=np.float32).reshape(8, 8)[idx])
m = CheckpointManager()
m.save({"w": w}, 5)
m.wait()
assert m.latest() == 5, m.latest()
out = m.restore({"w": jax.ShapeDtypeStruct((8, 8), jnp.float32, sharding=sh)})
full = multihost_utils.process_allgather(out["w"], tiled=True)
assert np.array_equal(np.asarray(full), np.arange(64, dtype=np.float32).reshape(8, 8))
m.close()
print("process", env.process_id, "restored", m.latest(), flush=True)
"""

# Each rank: a gloo group from the contract (MASTER_PORT = coordinator port + 1), an all-reduce,
# and a DCP save/restore through the CheckpointManager into one shared dir.
TORCH_JOB = r"""
import os
import torch, torch.distributed as dist
from adventuretime import CheckpointManager, RunEnv, init_distributed
print("framework", init_distributed("torch"), flush=True)
env = RunEnv.from_env()
assert dist.get_world_size() == 2 and dist.get_rank() == env.process_id
t = torch.tensor([env.process_id + 1.0])
dist.all_reduce(t)
assert t.item() == 3.0, t
m = CheckpointManager()
m.save({"w": torch.arange(4.0) + env.process_id * 0}, 7)
assert m.latest() == 7, m.latest()
state = {"w": torch.zeros(4)}
m.restore(state)
assert torch.equal(state["w"], torch.arange(4.0)), state
dist.barrier()
dist.destroy_process_group()
print("rank", env.process_id, "restored", m.latest(), flush=True)
# torch's store client can abort in its destructor at interpreter exit once rank 0 (the store's
# host) is gone ("terminate called without an active exception", SIGABRT): torch's teardown,
# not what this test checks, so the ranks leave without running destructors.
os._exit(0)
"""


def gang(code, d, n=2, port=None):
    port = port or free_port()
    procs = [
        spawn(
            code,
            child_env(
                ADV_RUN="dist",
                ADV_PROCESS_ID=k,
                ADV_NUM_PROCESSES=n,
                ADV_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
                ADV_CKPT_DIR=os.path.join(d, "ckpt"),
                ADV_CKPT_MODE="shared",
                JAX_PLATFORMS="cpu",
            ),
        )
        for k in range(n)
    ]
    results = []
    try:
        for p in procs:
            results.append(finish(p))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return results


class SingleProcessTest(unittest.TestCase):
    def test_jax_alone_needs_nothing(self):
        import jax

        self.assertEqual(init_distributed("jax", env=RunEnv.from_env({})), "jax")
        self.assertEqual(jax.process_count(), 1)

    def test_torch_alone_gets_a_group_of_one(self):
        import torch.distributed as dist

        try:
            self.assertEqual(init_distributed("torch", env=RunEnv.from_env({})), "torch")
            self.assertEqual((dist.get_rank(), dist.get_world_size()), (0, 1))
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()

    def test_an_unknown_framework_is_refused(self):
        with self.assertRaisesRegex(ValueError, "use 'jax' or 'torch'"):
            init_distributed("mxnet", env=RunEnv.from_env({}))


class TwoProcessTest(unittest.TestCase):
    def test_jax_two_processes_share_one_orbax_checkpoint(self):
        with TempDir() as d:
            results = gang(JAX_JOB, d)
            for k, (code, out) in enumerate(results):
                self.assertEqual(code, 0, f"process {k}:\n{out}")
                self.assertIn("framework jax", out)
                self.assertIn(f"process {k} restored 5", out)
            self.assertEqual(sorted(os.listdir(os.path.join(d, "ckpt"))), ["5"])
            self.assertTrue(os.path.exists(os.path.join(d, "ckpt", "5", "COMMITTED")))

    def test_torch_two_ranks_share_one_dcp_checkpoint(self):
        import socket

        # The coordinator's port is taken (by JAX's coordinator, in a job that runs both):
        # torch's store must be on the next one.
        with TempDir() as d, socket.socket() as held:
            held.bind(("127.0.0.1", 0))
            held.listen()
            results = gang(TORCH_JOB, d, port=held.getsockname()[1])
            for k, (code, out) in enumerate(results):
                self.assertEqual(code, 0, f"rank {k}:\n{out}")
                self.assertIn(f"rank {k} restored 7", out)
            step = os.path.join(d, "ckpt", "7")
            self.assertTrue(os.path.exists(os.path.join(step, "COMMITTED")))
            self.assertTrue(os.path.exists(os.path.join(step, ".metadata")))
            self.assertEqual(sorted(os.listdir(os.path.join(d, "ckpt"))), ["7"])


if __name__ == "__main__":
    unittest.main()
