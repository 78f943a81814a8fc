#!/usr/bin/env python3
"""A toy training job that follows the AdventureTime checkpoint contract with the standard library.

- Resumes from the highest step directory in $ADV_CKPT_DIR (adv exec restores the newest committed
  checkpoint there before starting).
- Every --ckpt-every steps, writes the state to a temporary directory and renames it to
  $ADV_CKPT_DIR/<step>: the rename is what tells adv exec the checkpoint is complete (Orbax does
  the same). adv exec uploads it, files first and manifest last.
- On SIGTERM or SIGUSR1 (a preemption notice, a time limit), writes one last checkpoint and exits.
- With --hold-file F (and --hold-at N), from step N on it waits while F exists: a step as long as
  you like, to preempt or kill it at a chosen point in a demo or a test. Stop notices still work.

Run it alone:        ADV_CKPT_DIR=/tmp/ck python3 train.py --steps 50
Run it under adv:    adv exec --store file:///tmp/store --run toy -- python3 train.py --steps 50
"""
import argparse
import json
import math
import os
import random
import signal
import sys
import time


def latest_step(ckpt_dir):
    steps = [int(d) for d in os.listdir(ckpt_dir) if d.isdigit() and os.path.isdir(os.path.join(ckpt_dir, d))]
    return max(steps) if steps else None


def save(ckpt_dir, step, state, pad_bytes):
    tmp = os.path.join(ckpt_dir, f"{step}.tmp-{os.getpid()}")
    os.makedirs(tmp, exist_ok=True)
    with open(os.path.join(tmp, "state.json"), "w") as f:
        json.dump(state, f)
    if pad_bytes:
        # Deterministic filler, standing in for parameter shards.
        with open(os.path.join(tmp, "shard-0.bin"), "wb") as f:
            f.write(random.Random(step).randbytes(pad_bytes))
    with open(os.path.join(tmp, "adv-metadata.json"), "w") as f:
        json.dump({"framework": "toy", "python": sys.version.split()[0], "mesh": {"axes": ["data"], "shape": [1]}}, f)
    final = os.path.join(ckpt_dir, str(step))
    os.rename(tmp, final)  # atomic: the checkpoint appears complete or not at all
    print(f"checkpoint {step} written", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--ckpt-every", type=int, default=10)
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--ckpt-bytes", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--hold-file", default=None)
    p.add_argument("--hold-at", type=int, default=0)
    args = p.parse_args()

    ckpt_dir = os.environ.get("ADV_CKPT_DIR", "./ckpt")
    artifact_dir = os.environ.get("ADV_ARTIFACT_DIR", "./artifacts")
    os.makedirs(ckpt_dir, exist_ok=True)
    os.makedirs(artifact_dir, exist_ok=True)

    # Handlers first: from the first line printed on, a stop notice gets a last checkpoint.
    stop = {"signal": None}

    def on_signal(signum, _frame):
        stop["signal"] = signum

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGUSR1, on_signal)

    # y = 3x + 1 plus noise; learn w, b by SGD.
    state = {"step": 0, "w": 0.0, "b": 0.0, "loss": None}
    resumed = latest_step(ckpt_dir)
    if resumed is not None:
        with open(os.path.join(ckpt_dir, str(resumed), "state.json")) as f:
            state = json.load(f)
        print(f"resumed from step {state['step']}", flush=True)
    else:
        print("starting from scratch", flush=True)

    while state["step"] < args.steps:
        while (
            args.hold_file
            and state["step"] >= args.hold_at
            and stop["signal"] is None
            and os.path.exists(args.hold_file)
        ):
            time.sleep(0.05)
        rng = random.Random(state["step"])
        x = rng.uniform(-1, 1)
        y = 3 * x + 1 + rng.gauss(0, 0.01)
        err = state["w"] * x + state["b"] - y
        state["w"] -= args.lr * err * x
        state["b"] -= args.lr * err
        state["loss"] = err * err
        state["step"] += 1
        if args.step_sleep:
            time.sleep(args.step_sleep)
        if state["step"] % args.ckpt_every == 0 or state["step"] == args.steps:
            save(ckpt_dir, state["step"], state, args.ckpt_bytes)
        if stop["signal"] is not None:
            if state["step"] % args.ckpt_every != 0:
                save(ckpt_dir, state["step"], state, args.ckpt_bytes)
            print(f"stopping at step {state['step']} on signal {stop['signal']}", flush=True)
            sys.exit(128 + stop["signal"])

    with open(os.path.join(artifact_dir, "final.json"), "w") as f:
        json.dump(state, f)
    print(f"done: step {state['step']} w={state['w']:.3f} b={state['b']:.3f} loss={state['loss']:.2e}", flush=True)
    assert math.isfinite(state["w"])


if __name__ == "__main__":
    main()
