"""AdventureTime's run contract for Python workloads (standard library only; JAX, Orbax, torch optional).

No workload needs this package: the contract is environment variables and a checkpoint directory.
It types them and does the common things right. JAX, Orbax, torch and wandb are imported only
when a function that needs them is called.
"""

from .artifacts import artifact_part, committed_parts
from .checkpoint import CheckpointManager
from .distributed import init_distributed
from .env import ContractError, RunEnv
from .metrics import log
from .preempt import on_preempt, preempted
from .tracking import tracking_id, wandb_init

__all__ = [
    "CheckpointManager",
    "ContractError",
    "artifact_part",
    "committed_parts",
    "RunEnv",
    "init_distributed",
    "log",
    "on_preempt",
    "preempted",
    "tracking_id",
    "wandb_init",
]
# Written by the build from package.json (a test fails when they differ): versioned with the CLI.
__version__ = "0.1.0"
