"""The stop notice: adv exec forwards a preemption or cancel to the workload as one signal
(``$ADV_STOP_SIGNAL``, SIGTERM by default), then waits a grace period before SIGKILL.

``preempted()`` says whether it came; ``on_preempt(fn)`` runs ``fn`` once when it does (a last
checkpoint, a flush). After the handlers:
  - a program that has asked ``preempted()`` at least once stops itself (its loop checks the flag);
  - any other program exits with 128 + the signal number, as it would have without a handler,
    so adv exec records the attempt as stopped (Preempted) and the next one resumes.
Handlers are installed on first use, from the main thread (Python's rule for signal handlers).
"""

import signal
import sys
import threading
import traceback

_lock = threading.Lock()
_flag = threading.Event()
_handlers = []
_installed = []
_polled = [False]
_received = []


def stop_signals(env=None):
    """The signals that mean "stop": ``$ADV_STOP_SIGNAL`` when set, else SIGTERM and SIGUSR1
    (SLURM's ``--signal=B:USR1@grace`` when a workload runs without adv exec)."""
    import os

    name = (env if env is not None else os.environ).get("ADV_STOP_SIGNAL")
    if name:
        sig = getattr(signal, name if name.startswith("SIG") else "SIG" + name, None)
        if not isinstance(sig, signal.Signals):
            raise ValueError(f"$ADV_STOP_SIGNAL is {name!r}, not a signal name (SIGTERM, SIGUSR1, ...)")
        return (sig,)
    return (signal.SIGTERM, signal.SIGUSR1)


def _on_signal(signum, _frame):
    with _lock:
        first = not _flag.is_set()
        _flag.set()
        _received.append(signum)
        todo = list(_handlers) if first else []
        _handlers.clear()
    for fn in todo:
        try:
            fn()
        except Exception:  # one failing handler must not keep the others from running
            print(f"adventuretime: preemption handler {fn!r} failed:", file=sys.stderr)
            traceback.print_exc()
    if first and not _polled[0]:
        sys.exit(128 + signum)


def install():
    """Installs the handlers (idempotent). Only the main thread may install signal handlers."""
    with _lock:
        if _installed:
            return
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("adventuretime: call preempted()/on_preempt() first from the main thread")
        for sig in stop_signals():
            signal.signal(sig, _on_signal)
            _installed.append(sig)


def preempted():
    """Whether the stop notice has come. Asking it once tells the package the loop stops itself."""
    install()
    _polled[0] = True
    return _flag.is_set()


def on_preempt(fn):
    """Runs ``fn()`` once when the stop notice comes (at once if it has come). Returns ``fn``,
    so it works as a decorator."""
    install()
    with _lock:
        now = _flag.is_set()
        if not now:
            _handlers.append(fn)
    if now:
        fn()
    return fn


def _reset_for_tests():
    """Forgets the notice and the handlers (the installed signal handlers stay)."""
    with _lock:
        _flag.clear()
        _handlers.clear()
        _received.clear()
        _polled[0] = False
