"""What the tests share: the package on sys.path, the repo's paths, and a subprocess runner."""

import os
import subprocess
import sys
import tempfile

TESTS = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(TESTS)
SRC = os.path.join(PKG, "src")
REPO = os.path.dirname(os.path.dirname(PKG))
if SRC not in sys.path:
    sys.path.insert(0, SRC)

#: Generous: the tests share two cores with other test runs; a bound, never a wait.
SLOW = 300


def child_env(**extra):
    """A clean environment for a child Python: the package importable, no contract leaking in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ADV_", "JAX_", "WANDB_"))}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    env["PYTHONPATH"] = SRC
    env["PYTHONUNBUFFERED"] = "1"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def spawn(code, env, cwd=None):
    """Starts ``python -c code``; the caller waits on it (with a bound) or kills it."""
    return subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(proc, timeout=SLOW):
    """Waits for ``proc`` (killing it past ``timeout``); returns (exit code, output)."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError(f"child still running after {timeout}s; its output:\n{out}")
    return proc.returncode, out


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TempDir:
    """A temp dir as a context manager that the test cleans up."""

    def __enter__(self):
        self._t = tempfile.TemporaryDirectory(prefix="adv-py-")
        return self._t.name

    def __exit__(self, *exc):
        self._t.cleanup()
