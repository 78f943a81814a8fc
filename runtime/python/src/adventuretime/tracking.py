"""Experiment trackers across attempts: one id per run, so a resumed attempt continues the same
tracked run. The controller puts it in the job's environment as ``ADV_TRACKING_ID`` (and sets
``WANDB_RUN_ID`` to it with ``WANDB_RESUME=allow``; a spec's own ``WANDB_*`` wins).
"""

import os

TRACKING_ID_ENV = "ADV_TRACKING_ID"


def tracking_id(env=None):
    """The run's tracking id: ``$ADV_TRACKING_ID``, else ``$WANDB_RUN_ID``, else None (outside
    AdventureTime, where each start is a new tracked run)."""
    env = os.environ if env is None else env
    return env.get(TRACKING_ID_ENV) or env.get("WANDB_RUN_ID") or None


def wandb_init(**kwargs):
    """``wandb.init(**kwargs)`` with the run's id and ``resume="allow"`` (unless given), so the
    attempts of one run log to one W&B run even where wandb does not read the environment
    (a notebook, a launcher that clears it). Only process 0 should call it. Needs wandb installed."""
    try:
        import wandb
    except ImportError:
        raise ImportError("wandb_init needs wandb: pip install wandb") from None
    tid = tracking_id()
    if tid:
        kwargs.setdefault("id", os.environ.get("WANDB_RUN_ID") or tid)
        kwargs.setdefault("resume", os.environ.get("WANDB_RESUME") or "allow")
    if os.environ.get("WANDB_RUN_GROUP"):
        kwargs.setdefault("group", os.environ["WANDB_RUN_GROUP"])
    run = os.environ.get("ADV_RUN")
    if run:
        kwargs.setdefault("name", run)
    return wandb.init(**kwargs)
