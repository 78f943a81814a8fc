"""The run contract, typed: what ``adv exec`` tells a workload through its environment.

Every field has a local default, so the same script runs on a laptop (run ``local``, attempt 1,
one process, checkpoints in ``./checkpoints``) and under AdventureTime on any backend.
"""

import json
import os
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional

from .layout import latest_step

#: The variables this module reads (the contract; docs/python.md lists what each means).
CONTRACT_VARS = (
    "ADV_RUN",
    "ADV_ATTEMPT",
    "ADV_PROCESS_ID",
    "ADV_NUM_PROCESSES",
    "ADV_LOCAL_PROCESS_ID",
    "ADV_LOCAL_PROCESS_COUNT",
    "ADV_LOCAL_DEVICE_COUNT",
    "ADV_COORDINATOR_ADDRESS",
    "ADV_CKPT_DIR",
    "ADV_CKPT_URI",
    "ADV_CKPT_MODE",
    "ADV_ARTIFACT_DIR",
    "ADV_JOB_DIR",
    "ADV_CACHE_DIR",
    "ADV_BACKEND",
    "ADV_METRICS_FILE",
    "ADV_STOP_SIGNAL",
    "ADV_TRACKING_ID",
    "ADV_INPUTS",
    "ADV_OUTPUTS",
)


class ContractError(ValueError):
    """A contract variable holds something that cannot be right (names the variable and the fix)."""


def _whole(env, names, default, minimum=0):
    """The first of ``names`` that is set, as a whole number >= minimum; ``default`` when none is."""
    for name in names:
        raw = env.get(name)
        if raw is None or raw.strip() == "":
            continue
        try:
            value = int(raw.strip())
        except ValueError:
            raise ContractError(f"${name} is {raw!r}, not a whole number") from None
        if value < minimum:
            raise ContractError(f"${name} is {value}; it must be >= {minimum}")
        return value
    return default


def _inputs(env):
    """DAG inputs: name -> the local dir adv exec downloaded it into (``ADV_INPUT_<name>_DIR``)."""
    raw = env.get("ADV_INPUTS")
    names = []
    if raw:
        try:
            names = list(json.loads(raw))
        except (ValueError, TypeError):
            raise ContractError(f"$ADV_INPUTS is not a JSON object: {raw[:80]!r}") from None
    out = {}
    for name in names:
        d = env.get(f"ADV_INPUT_{name}_DIR")
        if d:
            out[name] = d
    return out


#: ckpt dir -> the step found there the first time this process read the contract: what adv exec
#: restored, even when RunEnv.from_env() is called again after the workload saved new steps.
_AT_START = {}


def _restored_step(ckpt_dir, own_env):
    if not own_env:
        return latest_step(ckpt_dir)
    if ckpt_dir not in _AT_START:
        _AT_START[ckpt_dir] = latest_step(ckpt_dir)
    return _AT_START[ckpt_dir]


@dataclass(frozen=True)
class RunEnv:
    """Where this process is and where its state goes. Build it with ``RunEnv.from_env()``."""

    run: str = "local"
    attempt: int = 1
    process_id: int = 0
    num_processes: int = 1
    local_process_id: int = 0
    local_process_count: int = 1
    #: Accelerators this process may use; 0 when the backend does not know.
    local_device_count: int = 0
    #: ``host:port`` of process 0 (JAX's coordinator; torch uses port + 1). None for one process.
    coordinator_address: Optional[str] = None
    ckpt_dir: str = ""
    #: The object store location of the checkpoints in store mode (``checkpoint.mode: store``).
    ckpt_uri: Optional[str] = None
    #: ``per-process``, ``shared`` or ``store`` where the backend says; None otherwise.
    ckpt_mode: Optional[str] = None
    artifact_dir: str = ""
    job_dir: Optional[str] = None
    cache_dir: Optional[str] = None
    #: The backend's name, where the contract carries it (``ADV_BACKEND``; no backend sets it yet).
    backend: Optional[str] = None
    metrics_file: Optional[str] = None
    #: The signal adv exec stops the workload with (``ADV_STOP_SIGNAL``); None means SIGTERM.
    stop_signal: Optional[str] = None
    tracking_id: Optional[str] = None
    #: DAG inputs: name -> local dir holding the upstream node's output.
    inputs: Dict[str, str] = field(default_factory=dict)
    #: Outputs the run declares: name -> the dir to write it into (parts while it runs, the rest at exit 0).
    outputs: Dict[str, str] = field(default_factory=dict)
    #: The newest finished step in ``ckpt_dir`` when this was read (what adv exec restored).
    restored_step: Optional[int] = None
    #: Whether the variables came from adv exec (``ADV_RUN`` set) rather than local defaults.
    managed: bool = False

    @property
    def is_primary(self) -> bool:
        """Process 0: the one that writes metrics, single-writer checkpoints and reports."""
        return self.process_id == 0

    @property
    def resumed(self) -> bool:
        """Whether this attempt starts from a checkpoint rather than from scratch."""
        return self.restored_step is not None

    @property
    def distributed(self) -> bool:
        return self.num_processes > 1

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None) -> "RunEnv":
        """Reads the contract from ``env`` (default ``os.environ``); raises ContractError on nonsense."""
        env = os.environ if env is None else env
        run = env.get("ADV_RUN") or "local"
        n = _whole(env, ("ADV_NUM_PROCESSES", "JAX_NUM_PROCESSES", "WORLD_SIZE"), 1, 1)
        k = _whole(env, ("ADV_PROCESS_ID", "JAX_PROCESS_ID", "RANK"), 0)
        if k >= n:
            raise ContractError(f"process id {k} is not below the process count {n} ($ADV_PROCESS_ID, $ADV_NUM_PROCESSES)")
        lk = _whole(env, ("ADV_LOCAL_PROCESS_ID", "LOCAL_RANK"), 0)
        ln = _whole(env, ("ADV_LOCAL_PROCESS_COUNT", "LOCAL_WORLD_SIZE"), 1, 1)
        coordinator = env.get("ADV_COORDINATOR_ADDRESS") or env.get("JAX_COORDINATOR_ADDRESS") or None
        if n > 1 and not coordinator:
            raise ContractError(
                f"a job of {n} processes needs $ADV_COORDINATOR_ADDRESS (host:port of process 0); adv exec sets it"
            )
        ckpt_dir = os.path.abspath(env.get("ADV_CKPT_DIR") or "checkpoints")
        artifact_dir = os.path.abspath(env.get("ADV_ARTIFACT_DIR") or "artifacts")
        outputs = [o for o in (env.get("ADV_OUTPUTS") or "").split(",") if o]
        return cls(
            run=run,
            attempt=_whole(env, ("ADV_ATTEMPT",), 1, 1),
            process_id=k,
            num_processes=n,
            local_process_id=lk,
            local_process_count=ln,
            local_device_count=_whole(env, ("ADV_LOCAL_DEVICE_COUNT",), 0),
            coordinator_address=coordinator if n > 1 else None,
            ckpt_dir=ckpt_dir,
            ckpt_uri=env.get("ADV_CKPT_URI") or None,
            ckpt_mode=env.get("ADV_CKPT_MODE") or None,
            artifact_dir=artifact_dir,
            job_dir=env.get("ADV_JOB_DIR") or None,
            cache_dir=env.get("ADV_CACHE_DIR") or None,
            backend=env.get("ADV_BACKEND") or None,
            metrics_file=env.get("ADV_METRICS_FILE") or None,
            stop_signal=env.get("ADV_STOP_SIGNAL") or None,
            tracking_id=env.get("ADV_TRACKING_ID") or None,
            inputs=_inputs(env),
            outputs={o: os.path.join(artifact_dir, o) for o in outputs},
            restored_step=_restored_step(ckpt_dir, env is os.environ),
            managed=bool(env.get("ADV_RUN")),
        )
