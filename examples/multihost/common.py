"""What both multi-host examples share: the distributed contract adv exec exports, a collective
stop decision, and a hold knob for tests and demos. Standard library only."""
import argparse
import os
import signal
import time


def contract():
    """(process id, process count, coordinator) from what adv exec exports on every backend."""
    n = int(os.environ.get("JAX_NUM_PROCESSES") or os.environ.get("WORLD_SIZE") or "1")
    k = int(os.environ.get("JAX_PROCESS_ID") or os.environ.get("RANK") or "0")
    return k, n, os.environ.get("JAX_COORDINATOR_ADDRESS")


class Stop:
    """Records a stop notice. adv exec turns whatever the scheduler sent (SLURM's SIGUSR1, a
    kubelet's or gcloud's SIGTERM) into policy.stopSignal, SIGTERM by default: that is the only
    signal handled here, on purpose."""

    def __init__(self):
        self.requested = 0
        signal.signal(signal.SIGTERM, self._on)

    def _on(self, *_):
        self.requested = 1

    def exit_code(self):
        """After a stop: 128 + SIGTERM where the notice arrived (as a killed process would: the
        attempt is Preempted and resumes), 0 where the process stopped only because the others
        agreed to. A gang ends as its signalled processes say; and a non-zero exit of any other
        process would end the whole gang at once (Volcano's PodFailed → TerminateJob, srun's
        --kill-on-bad-exit) while process 0 may still be committing the last step."""
        return 128 + signal.SIGTERM if self.requested else 0


class Hold:
    """--hold-file F --hold-at N: from step N on, wait while F exists. The decision to hold, to go
    on, or to stop is collective (reduce(max) over every process), so all processes take it at the
    same step and their collectives stay in lockstep."""

    def __init__(self, path, at, reduce_max):
        self.path, self.at, self.reduce_max = path, at, reduce_max

    def should_stop(self, step, stop):
        while True:
            holding = 1 if (self.path and step >= self.at and os.path.exists(self.path)) else 0
            held, stopped = self.reduce_max([holding, stop.requested])
            if stopped:
                return True
            if not held:
                return False
            time.sleep(0.05)


def parse_args():
    """The examples' flags: how long to train, how often to save, and the hold knob."""
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--ckpt-every", type=int, default=5)
    p.add_argument("--hold-file", help="from --hold-at on, wait while this file exists")
    p.add_argument("--hold-at", type=int, default=0)
    return p.parse_args()
