"""The checkpoint dir's layout, as adv exec reads it (runtime/checkpoint.ts, runtime/step-finder.ts).

A step is the dir ``<dir>/<step>/`` (digits only). It is finished when it holds a marker:
``COMMITTED`` (ours) or Orbax's ``commit_success.txt``. adv exec uploads finished steps and
restores the newest committed one into the dir before the workload starts.
"""

import os
import re
import shutil
import uuid

COMMITTED_MARKER = "COMMITTED"
ORBAX_COMMIT_MARKER = "commit_success.txt"
#: Either marker says a step dir is finished (runtime/checkpoint.ts FINISHED_MARKERS).
FINISHED_MARKERS = (COMMITTED_MARKER, ORBAX_COMMIT_MARKER)

_STEP = re.compile(r"^\d{1,18}$")


def is_step_name(name):
    return bool(_STEP.match(name))


def is_finished(step_dir):
    return any(os.path.exists(os.path.join(step_dir, m)) for m in FINISHED_MARKERS)


def finished_steps(directory):
    """The finished steps in ``directory``, oldest first ([] when it does not exist)."""
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(int(n) for n in names if is_step_name(n) and is_finished(os.path.join(directory, n)))


def latest_step(directory):
    steps = finished_steps(directory)
    return steps[-1] if steps else None


def tmp_dir_for(directory, step):
    """A fresh, non-step name in ``directory`` to build step ``step`` in before the rename."""
    return os.path.join(directory, f".{step}.tmp-{uuid.uuid4().hex[:8]}")


def write_marker(step_dir):
    """Writes ``COMMITTED`` (the step's content is complete); atomic, so no reader sees half of it."""
    tmp = os.path.join(step_dir, f".{COMMITTED_MARKER}.{uuid.uuid4().hex[:8]}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("ok\n")
    os.replace(tmp, os.path.join(step_dir, COMMITTED_MARKER))


def publish(tmp, directory, step):
    """Makes the finished ``tmp`` dir the step ``<directory>/<step>`` with one rename.

    A leftover unfinished dir of that step (a save killed half way) is garbage and goes first.
    Returns False (and removes ``tmp``) when a finished step of that number is already there.
    """
    final = os.path.join(directory, str(step))
    if os.path.isdir(final):
        if is_finished(final):
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        shutil.rmtree(final)
    os.rename(tmp, final)
    return True
