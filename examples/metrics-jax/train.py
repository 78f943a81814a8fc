"""A small JAX training loop on CPU that logs its loss for the dashboard's plots.

Linear regression by gradient descent. Each step logs ``loss`` (and ``lr``) with
``adventuretime.log``, which appends a line to ``$ADV_METRICS_FILE`` for ``adv exec`` to ship.
Every ``CKPT_EVERY`` steps it checkpoints to ``$ADV_CKPT_DIR/<step>/`` and finishes the step with a
``COMMITTED`` marker (written last: that is what ``adv exec`` uploads); it starts from the highest
committed step there, so a preempted run resumes and redoes only the steps after its checkpoint.

Run it with ``PYTHONPATH=<repo>/runtime/python/src``. Outside AdventureTime it checkpoints to
./checkpoints and logs nothing.

Environment: ``TRAIN_STEPS`` (default 40), ``CKPT_EVERY`` (default 10), and for tests
``PREEMPT_AT_STEP``: in attempt 1, after that step, the job asks ``adv exec`` (its parent) to stop,
as a spot reclaim would, and ends when the stop signal is forwarded to it, without a last checkpoint
(so the steps after the checkpoint are redone by attempt 2). A stopped run exits 128 + the signal.
"""

import json
import os
import signal
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from adventuretime import log

STEPS = int(os.environ.get("TRAIN_STEPS", "40"))
CKPT_EVERY = int(os.environ.get("CKPT_EVERY", "10"))
PREEMPT_AT = int(os.environ.get("PREEMPT_AT_STEP", "0") or 0)
CKPT_DIR = os.environ.get("ADV_CKPT_DIR", "./checkpoints")
ATTEMPT = int(os.environ.get("ADV_ATTEMPT", "1") or 1)
LR = 0.05

stopping = 0


def _on_stop(signum, frame):
    global stopping
    stopping = signum


def exit_stopped(step):
    # Not 0: a stopped job that exits 0 tells adv exec its work is done (the run would succeed).
    print(f"stopped after step {step}", flush=True)
    sys.exit(128 + stopping)


signal.signal(signal.SIGTERM, _on_stop)
signal.signal(signal.SIGUSR1, _on_stop)


def latest_step(directory):
    """The highest step directory with a COMMITTED marker, or None."""
    if not os.path.isdir(directory):
        return None
    steps = [
        int(d)
        for d in os.listdir(directory)
        if d.isdigit() and os.path.exists(os.path.join(directory, d, "COMMITTED"))
    ]
    return max(steps, default=None)


def save(step, params):
    d = os.path.join(CKPT_DIR, str(step))
    os.makedirs(d, exist_ok=True)
    np.savez(os.path.join(d, "params.npz"), w=np.asarray(params["w"]), b=np.asarray(params["b"]))
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump({"step": step}, f)
    # The marker last: the step is finished only once everything else is on disk.
    open(os.path.join(d, "COMMITTED"), "w").close()


def restore(step):
    z = np.load(os.path.join(CKPT_DIR, str(step), "params.npz"))
    return {"w": jnp.asarray(z["w"]), "b": jnp.asarray(z["b"])}


key = jax.random.PRNGKey(0)
kx, kn = jax.random.split(key)
x = jax.random.normal(kx, (256, 4))
true_w = jnp.array([1.5, -2.0, 0.5, 3.0])
y = x @ true_w + 0.7 + 0.1 * jax.random.normal(kn, (256,))


def loss_fn(params):
    pred = x @ params["w"] + params["b"]
    return jnp.mean((pred - y) ** 2)


@jax.jit
def train_step(params):
    loss, grads = jax.value_and_grad(loss_fn)(params)
    return jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads), loss


start = latest_step(CKPT_DIR)
if start is None:
    params = {"w": jnp.zeros(4), "b": jnp.zeros(())}
    start = 0
else:
    params = restore(start)
print(f"attempt {ATTEMPT}: starting after step {start}", flush=True)

for step in range(start + 1, STEPS + 1):
    params, loss = train_step(params)
    log(step, loss=float(loss), lr=LR)
    if step % CKPT_EVERY == 0:
        save(step, params)
    if stopping:
        exit_stopped(step)
    if ATTEMPT == 1 and step == PREEMPT_AT:
        os.kill(os.getppid(), signal.SIGTERM)
        # Wait for adv exec to forward the stop, so the preemption never races the loop's end.
        deadline = time.monotonic() + 120
        while not stopping and time.monotonic() < deadline:
            time.sleep(0.05)
        exit_stopped(step)

print(f"done at step {STEPS}, loss {float(loss_fn(params)):.4f}", flush=True)
