"""Checkpoints in the layout adv exec ships: ``<dir>/<step>/`` finished by a ``COMMITTED`` marker.

The format follows the state:
  - a JAX pytree (Orbax installed): Orbax's StandardCheckpointer; every process of a multi-host
    job calls ``save`` and Orbax writes each one's shards and finalizes on process 0;
  - torch tensors (a state dict, or anything with ``state_dict()``): ``torch.save`` by process 0,
    or torch.distributed.checkpoint (DCP) by every rank once a process group of several is up;
  - anything else: JSON when it is plain JSON data, pickle otherwise, by process 0.

Each step is built under a hidden name, gets its marker, and becomes ``<step>`` by one rename,
so adv exec (and ``latest()``) never see half a step. In a multi-process job with a directory per
process (``checkpoint.mode: per-process``), every process finishes the step in its own dir (the
ones that wrote nothing hold only the marker), so the gang's commit has every part it waits for.
"""

import atexit
import json
import os
import pickle
import shutil
import sys

from . import layout
from .env import RunEnv
from .preempt import critical, on_preempt

ORBAX = "orbax"
TORCH = "torch"
DCP = "torch-dcp"
JSON = "json"
PICKLE = "pickle"

_TORCH_FILE = "state.pt"
_JSON_FILE = "state.json"
_PICKLE_FILE = "state.pkl"
_DCP_METADATA = ".metadata"


def _leaves(tree, depth=0):
    if depth > 64:
        return
    if isinstance(tree, dict):
        for v in tree.values():
            yield from _leaves(v, depth + 1)
    elif isinstance(tree, (list, tuple)):
        for v in tree:
            yield from _leaves(v, depth + 1)
    else:
        yield tree


def _orbax_available():
    try:
        import orbax.checkpoint  # noqa: F401
    except ImportError:
        return False
    return True


def format_of(state):
    """The format ``save`` uses for ``state`` (JAX and torch only when the program imported them)."""
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(state, "state_dict") and callable(state.state_dict):
        return TORCH
    jax = sys.modules.get("jax")
    leaves = list(_leaves(state))
    if torch is not None and any(isinstance(x, torch.Tensor) for x in leaves):
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            return DCP
        return TORCH
    if jax is not None and any(isinstance(x, jax.Array) for x in leaves) and _orbax_available():
        return ORBAX
    try:
        json.dumps(state, allow_nan=False)
        return JSON
    except (TypeError, ValueError):
        return PICKLE


def format_on_disk(step_dir):
    """The format a finished step was written in, from its files."""
    for name, fmt in ((_TORCH_FILE, TORCH), (_DCP_METADATA, DCP), (_JSON_FILE, JSON), (_PICKLE_FILE, PICKLE)):
        if os.path.exists(os.path.join(step_dir, name)):
            return fmt
    return ORBAX


class CheckpointManager:
    """``save(state, step)``, ``latest()``, ``restore(target, step)``, ``wait()`` over the run's
    checkpoint dir (default: ``$ADV_CKPT_DIR``, or ``./checkpoints`` outside AdventureTime).

    ``keep``: how many finished steps to keep in the local dir (the store's copies are the run's
    ``policy.checkpoints`` business). ``save_on_preempt``: on the stop notice, save the last state
    given to ``update(state, step)`` (or ``save``) and wait for it, before the process stops.
    """

    def __init__(self, directory=None, *, keep=None, save_on_preempt=False, env=None):
        self.env = env or RunEnv.from_env()
        if keep is not None and (not isinstance(keep, int) or keep < 1):
            raise ValueError(f"keep={keep!r}: keep at least 1 step, or pass None to keep all")
        self.keep = keep
        uri = self.env.ckpt_uri if directory is None else None
        # Store mode over S3 and the like: Orbax writes straight there (no dir to rename in).
        self.remote = uri if uri and not uri.startswith("file:") else None
        self.directory = os.path.abspath(directory or self.env.ckpt_dir)
        # A dir the processes share (shared mode, one process): only process 0 writes and renames.
        self.shared = self.env.ckpt_mode in ("shared", "store") or self.env.num_processes == 1
        self._pending = None
        self._last = None
        self._orbax = None
        if not self.remote:
            os.makedirs(self.directory, exist_ok=True)
        if save_on_preempt:
            on_preempt(self._save_last)
        atexit.register(self.wait)

    # -- reading ---------------------------------------------------------------------------------

    def steps(self):
        """The finished steps in the dir (or at ``$ADV_CKPT_URI`` in store mode), oldest first."""
        if self.remote:
            return self._remote_steps()
        return layout.finished_steps(self.directory)

    def latest(self):
        """The newest finished step (what adv exec restored at start, or saved since), or None."""
        steps = self.steps()
        return steps[-1] if steps else None

    def restore(self, target=None, step=None):
        """The state saved at ``step`` (default: the latest). ``target``: a template of the state
        (Orbax: arrays or ShapeDtypeStructs with their shardings; DCP: the state dict to load
        into, required; torch: an object with ``load_state_dict`` is loaded and returned)."""
        self.wait()
        if step is None:
            step = self.latest()
        if step is None:
            raise FileNotFoundError(
                f"no finished checkpoint in {self.remote or self.directory}: check latest() is not None before restoring"
            )
        if self.remote:
            return self._restore_orbax(self._remote_path(step), target)
        path = os.path.join(self.directory, str(int(step)))
        if not layout.is_finished(path):
            raise FileNotFoundError(f"{path} is not a finished checkpoint (no {layout.COMMITTED_MARKER} marker)")
        return _RESTORE[format_on_disk(path)](self, path, target)

    # -- writing ---------------------------------------------------------------------------------

    def update(self, state, step):
        """Remembers ``state`` at ``step`` as the one to save on preemption (no I/O)."""
        self._last = (state, int(step))

    def save(self, state, step):
        """Saves ``state`` as step ``step``. Every process of the job calls it (each does its part).
        Orbax saves finish in the background: ``wait()`` (or the next save, or exit) commits them.
        Returns False when a finished step of that number is there already (nothing written)."""
        step = int(step)
        if step < 0:
            raise ValueError(f"step {step} is negative")
        # A stop notice that comes meanwhile is handled after it: a save is never cut in two.
        with critical():
            self.wait()
            self._last = (state, step)
            if self.remote:
                return self._save_orbax_remote(state, step)
            if layout.is_finished(os.path.join(self.directory, str(step))):
                return False
            return _SAVE[format_of(state)](self, state, step)

    def wait(self):
        """Blocks until the save under way (Orbax's, in the background) is finished and committed."""
        with critical():
            pending, self._pending = self._pending, None
            if pending is not None:
                pending()

    def close(self):
        self.wait()
        if self._orbax is not None:
            self._orbax.close()
            self._orbax = None

    # -- the pieces ------------------------------------------------------------------------------

    def _save_last(self):
        if self._last is None:
            return
        state, step = self._last
        self.save(state, step)
        self.wait()

    def _barrier(self, name):
        """All processes meet here: over torch's process group, or JAX's, whichever is up (with
        neither, the processes write only their own dirs and need not meet)."""
        if self.env.num_processes <= 1:
            return
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            dist.barrier()
            return
        jax = sys.modules.get("jax")
        if jax is not None and jax.process_count() > 1:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices(name)

    def _finish(self, tmp, step):
        """Marker in, rename to ``<step>``, old steps out. Every process calls it; in a shared dir
        process 0 does the work and the others only wait for it."""
        multi = self.env.num_processes > 1
        if multi:
            self._barrier(f"adv-ckpt-written-{step}")
        if self.env.is_primary or not self.shared:
            os.makedirs(tmp, exist_ok=True)  # a process that wrote nothing still finishes its part
            layout.write_marker(tmp)
            layout.publish(tmp, self.directory, step)
            self._prune()
        if multi:
            self._barrier(f"adv-ckpt-committed-{step}")

    def _prune(self):
        if self.keep is None:
            return
        steps = self.steps()
        for old in steps[: max(0, len(steps) - self.keep)]:
            shutil.rmtree(os.path.join(self.directory, str(old)), ignore_errors=True)

    def _single_writer(self, step, write):
        """torch.save, JSON, pickle: process 0 writes the files; every process finishes its part."""
        tmp = layout.tmp_dir_for(self.directory, step)
        if self.env.is_primary:
            os.makedirs(tmp)
            write(tmp)
        self._finish(tmp, step)
        return True

    def _save_torch(self, state, step):
        import torch

        obj = state.state_dict() if hasattr(state, "state_dict") else state
        return self._single_writer(step, lambda d: torch.save(obj, os.path.join(d, _TORCH_FILE)))

    def _save_json(self, state, step):
        def write(d):
            with open(os.path.join(d, _JSON_FILE), "w", encoding="utf-8") as f:
                json.dump(state, f)

        return self._single_writer(step, write)

    def _save_pickle(self, state, step):
        def write(d):
            with open(os.path.join(d, _PICKLE_FILE), "wb") as f:
                pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)

        return self._single_writer(step, write)

    def _save_dcp(self, state, step):
        import torch.distributed.checkpoint as dcp

        # Every rank must name the same dir: deterministic, and cleared of a save killed half way.
        tmp = os.path.join(self.directory, f".{step}.dcp")
        if self.env.is_primary or not self.shared:
            shutil.rmtree(tmp, ignore_errors=True)
        self._barrier(f"adv-ckpt-clear-{step}")
        dcp.save(state, checkpoint_id=tmp)
        self._finish(tmp, step)
        return True

    def _orbax_checkpointer(self):
        if self._orbax is None:
            import orbax.checkpoint as ocp

            self._orbax = ocp.StandardCheckpointer()
        return self._orbax

    def _save_orbax(self, state, step):
        ckptr = self._orbax_checkpointer()
        tmp = os.path.join(self.directory, f".{step}.orbax")
        # Orbax makes the dir on process 0 and syncs the others before they write; force=True
        # replaces what a save killed half way left under that name.
        ckptr.save(tmp, state, force=True)

        def commit():
            ckptr.wait_until_finished()
            self._finish(tmp, step)

        self._pending = commit
        return True

    def _remote_path(self, step):
        return f"{self.remote.rstrip('/')}/{int(step)}"

    def _remote_steps(self):
        """Steps at the URI that Orbax committed (``commit_success.txt``, or our marker)."""
        from etils import epath

        root = epath.Path(self.remote)
        if not root.exists():
            return []
        return sorted(
            int(p.name)
            for p in root.iterdir()
            if layout.is_step_name(p.name) and any((p / m).exists() for m in layout.FINISHED_MARKERS)
        )

    def _save_orbax_remote(self, state, step):
        """Store mode: Orbax writes straight to the store and commits there (commit_success.txt);
        adv exec writes the manifest once it sees that. Only Orbax can write there."""
        if format_of(state) != ORBAX:
            raise ValueError(
                f"checkpoint.mode store writes straight to {self.remote}, which only Orbax can do: "
                "save a JAX pytree, or use checkpoint.mode per-process or shared for this state"
            )
        if step in self.steps():
            return False
        ckptr = self._orbax_checkpointer()
        ckptr.save(self._remote_path(step), state, force=True)
        self._pending = ckptr.wait_until_finished
        return True

    def _restore_orbax(self, path, target):
        return self._orbax_checkpointer().restore(path, target)

    def _restore_torch(self, path, target):
        import torch

        obj = torch.load(os.path.join(path, _TORCH_FILE), map_location="cpu", weights_only=True)
        if target is not None and hasattr(target, "load_state_dict"):
            target.load_state_dict(obj)
            return target
        return obj

    def _restore_dcp(self, path, target):
        import torch.distributed.checkpoint as dcp

        if target is None:
            raise ValueError(f"{path} is a torch.distributed.checkpoint: pass the state dict to load into as target")
        dcp.load(target, checkpoint_id=path)
        return target

    def _restore_json(self, path, _target):
        with open(os.path.join(path, _JSON_FILE), encoding="utf-8") as f:
            return json.load(f)

    def _restore_pickle(self, path, _target):
        with open(os.path.join(path, _PICKLE_FILE), "rb") as f:
            return pickle.load(f)


_SAVE = {
    ORBAX: CheckpointManager._save_orbax,
    TORCH: CheckpointManager._save_torch,
    DCP: CheckpointManager._save_dcp,
    JSON: CheckpointManager._save_json,
    PICKLE: CheckpointManager._save_pickle,
}
_RESTORE = {
    ORBAX: CheckpointManager._restore_orbax,
    TORCH: CheckpointManager._restore_torch,
    DCP: CheckpointManager._restore_dcp,
    JSON: CheckpointManager._restore_json,
    PICKLE: CheckpointManager._restore_pickle,
}
