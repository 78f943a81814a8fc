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
from contextlib import contextmanager

# Reentrant: the handler runs on the main thread, possibly while that thread holds the lock.
_lock = threading.RLock()
_flag = threading.Event()
_handlers = []
_installed = []
_polled = [False]
_ran = [False]
#: Depth of critical sections (a checkpoint being written) and the notice that came during one.
_depth = [0]
_deferred = []


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


def _run(signum):
    """The handlers, once; then the exit of a program that does not stop itself."""
    with _lock:
        if _ran[0]:
            return
        _ran[0] = True
        todo = list(_handlers)
        _handlers.clear()
    for fn in todo:
        try:
            fn()
        except Exception:  # one failing handler must not keep the others from running
            print(f"adventuretime: preemption handler {fn!r} failed:", file=sys.stderr)
            traceback.print_exc()
    if not _polled[0]:
        sys.exit(128 + signum)


def _on_signal(signum, _frame):
    _flag.set()
    if _depth[0] > 0:
        # A checkpoint is being written on this thread: a save (or an exit) now would cut into
        # it. The handlers run when it is done (critical()).
        _deferred.append(signum)
        return
    _run(signum)


@contextmanager
def critical():
    """A section the stop notice must not cut into (writing a checkpoint): its handlers and the
    exit wait for the section's end. Only the main thread's sections count (the handler runs on
    the main thread; another thread's save is never cut into by it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _depth[0] += 1
    try:
        yield
    finally:
        _depth[0] -= 1
        if _depth[0] == 0 and _deferred:
            signum = _deferred[0]
            _deferred.clear()
            _run(signum)


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
        ran_before = _ran[0]
        if not ran_before:
            _handlers.append(fn)
        # The notice may be handled between the check and the append (the handler runs on this
        # thread): then fn was left waiting, and runs now.
        late = not ran_before and _ran[0] and fn in _handlers
        if late:
            _handlers.remove(fn)
    if ran_before or late:
        fn()
    return fn

