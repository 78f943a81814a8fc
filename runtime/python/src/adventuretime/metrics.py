"""Metric events: one JSON line per call to ``log``, appended to ``$ADV_METRICS_FILE``.

``adv exec`` sets the variable and ships complete lines to the object store, like the output.
The line is ``{"step": 120, "time": 1764250000.25, "metrics": {"loss": 0.52}}`` (runtime/metrics.ts
reads it). Without the variable (a run outside AdventureTime) ``log`` does nothing.
"""

import json
import math
import os
import time

METRICS_FILE_ENV = "ADV_METRICS_FILE"


def _number(name, value):
    # jax/numpy/torch scalars: whatever converts to a float without loss of meaning.
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"metric {name!r}: {value!r} is not a number") from None
    return f


def log(step, **metrics):
    """Records ``metrics`` (name=number) at ``step``. Only process 0 of a multi-host job writes.

    Non-finite values (nan, inf) are dropped: JSON has no spelling for them.
    """
    path = os.environ.get(METRICS_FILE_ENV)
    if not path or int(os.environ.get("ADV_PROCESS_ID", "0") or 0) != 0:
        return
    step = int(step)
    if step < 0:
        raise ValueError(f"step {step} is negative")
    values = {}
    for k, v in metrics.items():
        f = _number(k, v)
        if math.isfinite(f):
            values[k] = f
    if not values:
        return
    line = json.dumps({"step": step, "time": round(time.time(), 3), "metrics": values}, separators=(",", ":"))
    # One write of a whole line in append mode: a reader never sees half of it mixed with another.
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
