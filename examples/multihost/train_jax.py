#!/usr/bin/env python3
"""A multi-host JAX + Orbax training job, as a lab writes one, that keeps its progress on every
AdventureTime backend.

- The parameters are one (256, 256) float32 array sharded over a (data, model) mesh of every
  device of every process: each process holds and writes only its own shards.
- jax.distributed.initialize is called with the three values adv exec exports on every backend
  (JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID): auto-detection is not relied on.
- Checkpoints go through Orbax's CheckpointManager into ADV_CKPT_URI (the object store itself, in
  store mode) or ADV_CKPT_DIR (a directory every process sees, in shared mode). Orbax writes every
  process's shards and commits (commit_success.txt, rename); adv exec uploads or indexes the step
  and writes the manifest once every process's part is there.
- On SIGTERM (adv exec's stop signal) all processes agree on a step, save it, and exit with
  128 + SIGTERM if this process got the signal (as a killed process would: the work is not
  done), 0 if it stopped only because the others agreed to (see common.Stop.exit_code).
- The update is elementwise, so the final parameters are bit-identical however the run was
  interrupted and on however many processes it resumed; process 0 prints `final-params <sha256>`.

Alone:            python train_jax.py --steps 40
Under adv exec:   adv exec --store file:///tmp/store --run demo -- python train_jax.py
"""
import hashlib
import os
import sys

from common import Hold, Stop, contract, parse_args

k, n, coordinator = contract()
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

# CPU collectives across processes (used only where the devices are CPUs; TPUs and GPUs have theirs).
jax.config.update("jax_cpu_collectives_implementation", "gloo")
if n > 1:
    jax.distributed.initialize(coordinator, n, k)

import orbax.checkpoint as ocp  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

SHAPE = (256, 256)


def reduce_max(values):
    if n == 1:
        return values
    return [int(v) for v in multihost_utils.process_allgather(np.array(values, dtype=np.int32)).max(axis=0)]


@jax.jit
def update(w, step):
    return w * 0.999 + jnp.sin(w + step.astype(jnp.float32) * 0.01) * 0.001


def main():
    args = parse_args()

    stop = Stop()
    hold = Hold(args.hold_file, args.hold_at, reduce_max)
    devices = np.array(jax.devices()).reshape(-1, 2)
    sharding = NamedSharding(Mesh(devices, ("data", "model")), PartitionSpec("data", "model"))
    where = os.environ.get("ADV_CKPT_URI") or os.environ["ADV_CKPT_DIR"]
    mngr = ocp.CheckpointManager(where, options=ocp.CheckpointManagerOptions(max_to_keep=3))

    start = mngr.latest_step()  # adv exec restored the same step for every process
    if start is None:
        w = jax.device_put(jnp.arange(SHAPE[0] * SHAPE[1], dtype=jnp.float32).reshape(SHAPE) / 65536.0, sharding)
        start = 0
        print(f"process {k}/{n}: starting from scratch", flush=True)
    else:
        target = {"w": jax.ShapeDtypeStruct(SHAPE, jnp.float32, sharding=sharding)}
        w = mngr.restore(start, args=ocp.args.StandardRestore(target))["w"]
        print(f"process {k}/{n}: restored step {start}", flush=True)

    step = start
    while step < args.steps:
        w = update(w, jnp.int32(step))
        step += 1
        stopping = hold.should_stop(step, stop)
        if step % args.ckpt_every == 0 or stopping:
            mngr.save(step, args=ocp.args.StandardSave({"w": w}), force=True)
            mngr.wait_until_finished()
            print(f"process {k}: checkpoint {step} written", flush=True)
        if stopping:
            print(f"process {k}: stopping at step {step}", flush=True)
            mngr.close()
            sys.exit(stop.exit_code())
    mngr.close()
    full = np.asarray(multihost_utils.process_allgather(w, tiled=True)) if n > 1 else np.asarray(w)
    if k == 0:
        digest = hashlib.sha256(full.tobytes()).hexdigest()
        print(f"final-params {digest}", flush=True)
        out = os.environ.get("ADV_ARTIFACT_DIR")
        if out:
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, "final-params.txt"), "w") as f:
                f.write(digest + "\n")


if __name__ == "__main__":
    main()
