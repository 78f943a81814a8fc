"""AdventureTime's run contract for Python workloads (standard library only; JAX, Orbax, torch optional).

No workload needs this package: the contract is environment variables and a checkpoint directory.
It types them and does the common things right.
"""

from .metrics import log

__all__ = ["log"]
__version__ = "0.1.0"
