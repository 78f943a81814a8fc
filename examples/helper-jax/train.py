#!/usr/bin/env python3
"""A JAX training job written with the `adventuretime` package: the same script on a laptop and
on every AdventureTime backend, preemption-safe, with its loss on the run's metrics.

- `RunEnv.from_env()` reads the contract (run, attempt, processes, checkpoint dir…); outside
  AdventureTime it gives local defaults (checkpoints in ./checkpoints).
- `init_distributed()` joins the other processes of a multi-host job (nothing for one process).
- `CheckpointManager` saves the parameters with Orbax as `$ADV_CKPT_DIR/<step>/` + `COMMITTED`,
  which adv exec uploads; the next attempt starts from the step adv exec restored.
- `save_on_preempt=True`: on the stop notice, the last state handed to `update()` is saved before
  the process exits; the loop also checks `preempted()` and stops cleanly.
- `log(step, loss=...)` appends the metric line adv exec ships (`adv metrics RUN`).

Alone:            python train.py --steps 200
Under adv exec:   adv exec --store file:///tmp/store --run demo -- python train.py
With --hold-file F --hold-at N it waits while F exists from step N on (to preempt it at a chosen
point in a test or a demo; the stop notice still works).
"""
import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp

from adventuretime import CheckpointManager, RunEnv, init_distributed, log, preempted


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--ckpt-every", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--hold-file")
    p.add_argument("--hold-at", type=int, default=0)
    return p.parse_args()


# y = 3x + 1: learn w, b by gradient descent on a fixed batch (deterministic, so a resumed run
# ends with the same parameters as one that was never stopped).
X = jnp.linspace(-1.0, 1.0, 64)
Y = 3.0 * X + 1.0


def loss_fn(params):
    return jnp.mean((params["w"] * X + params["b"] - Y) ** 2)


@jax.jit
def train_step(params, lr):
    loss, grads = jax.value_and_grad(loss_fn)(params)
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss


def main():
    args = parse_args()
    env = RunEnv.from_env()
    init_distributed("jax", env=env)
    mngr = CheckpointManager(keep=3, save_on_preempt=True, env=env)

    params = {"w": jnp.zeros(()), "b": jnp.zeros(())}
    step = 0
    if mngr.latest() is not None:
        step = mngr.latest()
        params = mngr.restore(params)
        print(f"attempt {env.attempt}: resumed from step {step}", flush=True)
    else:
        print(f"attempt {env.attempt}: starting from scratch", flush=True)

    while step < args.steps and not preempted():
        params, loss = train_step(params, args.lr)
        step += 1
        mngr.update(params, step)
        log(step, loss=loss)
        if step % args.ckpt_every == 0:
            mngr.save(params, step)
        if args.hold_file and step >= args.hold_at and os.path.exists(args.hold_file):
            print(f"holding at step {step}", flush=True)
            while os.path.exists(args.hold_file) and not preempted():
                time.sleep(0.05)

    if preempted():
        # The manager saved the last state when the notice came; exit as a stopped process does,
        # so the attempt counts as preempted and the next one resumes.
        print(f"stopped at step {step}", flush=True)
        mngr.close()
        sys.exit(143)
    mngr.save(params, step)
    mngr.close()
    if env.is_primary:
        print(f"done at step {step}: w={float(params['w']):.4f} b={float(params['b']):.4f}", flush=True)


if __name__ == "__main__":
    main()
