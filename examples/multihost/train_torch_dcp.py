#!/usr/bin/env python3
"""A multi-rank PyTorch job with torch.distributed.checkpoint (DCP), sharded parameters, and gloo,
that keeps its progress on every AdventureTime backend — with or without a shared disk.

- init_process_group reads MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE, which adv exec exports on
  every backend.
- The parameters are a (256, 256) DTensor sharded by rows over all ranks: each rank holds and
  writes only its own rows (DCP: one file per rank, `__<rank>_0.distcp`, plus rank 0's `.metadata`).
- Each checkpoint is saved to `$ADV_CKPT_DIR/<step>.tmp` and renamed to `<step>` by every rank that
  still sees the tmp dir after rank 0 renamed it: in a shared dir rank 0's rename is the one, in a
  per-process dir each rank renames its own. adv exec uploads each rank's files and writes the
  manifest once every rank's part is there; at restore every rank gets the whole step.
- On SIGTERM (adv exec's stop signal) all ranks agree on a step, save it, and exit with
  128 + SIGTERM if this process got the signal (as a killed process would: the work is not
  done), 0 if it stopped only because the others agreed to (see common.Stop.exit_code).
- Process 0 prints `final-params <sha256>`; bit-identical however the run was interrupted.
"""
import hashlib
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor

from common import Hold, Stop, parse_args

SHAPE = (256, 256)


def reduce_max(values):
    t = torch.tensor(values, dtype=torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [int(v) for v in t.tolist()]


def steps_in(ckpt):
    return sorted(int(d) for d in os.listdir(ckpt) if d.isdigit()) if os.path.isdir(ckpt) else []


def save(ckpt, step, w):
    tmp, final = os.path.join(ckpt, f"{step}.tmp"), os.path.join(ckpt, str(step))
    dcp.save({"w": w}, checkpoint_id=tmp)
    dist.barrier()
    if dist.get_rank() == 0:
        os.rename(tmp, final)
    dist.barrier()
    if os.path.exists(tmp):  # a dir of its own: this rank's view of the step is complete now
        os.rename(tmp, final)
    print(f"rank {dist.get_rank()}: checkpoint {step} written", flush=True)


def main():
    args = parse_args()

    stop = Stop()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    ckpt = os.environ["ADV_CKPT_DIR"]
    os.makedirs(ckpt, exist_ok=True)
    hold = Hold(args.hold_file, args.hold_at, reduce_max)

    full = torch.arange(SHAPE[0] * SHAPE[1], dtype=torch.float32).reshape(SHAPE) / 65536.0
    w = distribute_tensor(full, mesh, [Shard(0)])
    found = steps_in(ckpt)
    start = found[-1] if found else 0
    lo, hi = reduce_max([-start, start])
    if -lo != hi:
        sys.exit(f"rank {rank}: ranks see different checkpoints (steps {-lo} and {hi}); refusing to diverge")
    if start:
        state = {"w": w}
        dcp.load(state, checkpoint_id=os.path.join(ckpt, str(start)))
        w = state["w"]
        print(f"rank {rank}/{world}: restored step {start}", flush=True)
    else:
        print(f"rank {rank}/{world}: starting from scratch", flush=True)

    step = start
    while step < args.steps:
        w = w * 0.999 + torch.sin(w + step * 0.01) * 0.001
        step += 1
        stopping = hold.should_stop(step, stop)
        if step % args.ckpt_every == 0 or stopping:
            save(ckpt, step, w)
        if stopping:
            print(f"rank {rank}: stopping at step {step}", flush=True)
            dist.barrier()
            dist.destroy_process_group()
            sys.exit(stop.exit_code())
    gathered = w.full_tensor()
    if rank == 0:
        digest = hashlib.sha256(gathered.numpy().tobytes()).hexdigest()
        print(f"final-params {digest}", flush=True)
        out = os.environ.get("ADV_ARTIFACT_DIR")
        if out:
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, "final-params.txt"), "w") as f:
                f.write(digest + "\n")
    # Every rank reaches the teardown together: a rank that destroys its gloo group while a peer
    # is still busy (rank 0 above) can die in the destructor with SIGABRT ("terminate called
    # without an active exception"), after its last checkpoints were written but before adv exec
    # took them as finished.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
