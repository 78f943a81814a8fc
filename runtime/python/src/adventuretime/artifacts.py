"""Outputs written in immutable parts while the run goes on (runtime/artifact-parts.ts).

A part is a directory ``$ADV_ARTIFACT_DIR/<output>/parts/<part>/`` that appears whole: the workload
writes it under a hidden name (names starting with ``.`` are never parts) and renames it into place.
adv exec uploads each new part on every heartbeat and when the workload ends, however it ends, and
puts the parts earlier attempts committed back into ``parts/`` before the workload starts, so a
preempted rollout resumes from what it committed. A committed part is never changed: write new work
under a new name.
"""

import contextlib
import os
import re
import shutil
import time
import uuid
from typing import Iterator, List, Mapping, Optional

from .env import ContractError, RunEnv

PARTS = "parts"
#: A part's name (runtime/artifacts.ts PART_NAME).
PART_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.=-]{0,127}$")


def parts_dir(output: str, env: Optional[Mapping[str, str]] = None) -> str:
    """``$ADV_ARTIFACT_DIR/<output>/parts``; under adv exec, the output must be declared."""
    e = RunEnv.from_env(env)
    if e.managed and output not in e.outputs:
        declared = ", ".join(sorted(e.outputs)) or "none"
        raise ContractError(
            f'output "{output}" is not declared by run {e.run} (declared: {declared}): '
            f"add it under the run's outputs, or its parts are never published"
        )
    return os.path.join(e.artifact_dir, output, PARTS)


def committed_parts(output: str, env: Optional[Mapping[str, str]] = None) -> List[str]:
    """The names of the parts already there (this attempt's and earlier attempts'), sorted."""
    d = parts_dir(output, env)
    try:
        names = os.listdir(d)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(n for n in names if PART_NAME.match(n) and os.path.isdir(os.path.join(d, n)))


def _default_name(env: Optional[Mapping[str, str]]) -> str:
    e = RunEnv.from_env(env)
    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f"{int(now * 1000) % 1000:03d}"
    return f"{stamp}-a{e.attempt}-p{e.process_id}-{uuid.uuid4().hex[:6]}"


@contextlib.contextmanager
def artifact_part(output: str, name: Optional[str] = None, env: Optional[Mapping[str, str]] = None) -> Iterator[str]:
    """Writes one part of ``output``: yields an empty hidden dir; on success renames it to
    ``parts/<name>`` (a time-ordered unique name when none is given), on an exception removes it.

    Raises FileExistsError when a part of that name is there already (committed parts are
    immutable), ValueError for a name that is not a part name.

        with artifact_part("rollouts", name=f"shard-{i:05d}") as d:
            write_rollouts(os.path.join(d, "data.jsonl"))
    """
    if name is not None and not PART_NAME.match(name):
        raise ValueError(f"{name!r} is not a part name (letters, digits, '_', '.', '=', '-'; not starting with '.')")
    parts = parts_dir(output, env)
    final_name = name or _default_name(env)
    final = os.path.join(parts, final_name)
    if os.path.exists(final):
        raise FileExistsError(f"part {final_name} of output {output} is committed already: {final}")
    os.makedirs(parts, exist_ok=True)
    tmp = os.path.join(parts, f".{final_name}.tmp-{uuid.uuid4().hex[:8]}")
    os.makedirs(tmp)
    try:
        yield tmp
        if os.path.exists(final):
            raise FileExistsError(f"part {final_name} of output {output} is committed already: {final}")
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
