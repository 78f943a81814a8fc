#!/usr/bin/env bash
# Stops the test SLURM cluster started by slurm-start.sh (munge is left running). Jobs go first:
# the next start has a fresh state, so a job step left running would collide with a new job of
# the same id ("Duplicate jobid", node drained).
scancel --full --user=root 2>/dev/null
for f in /run/slurmctld.pid /run/slurmd-n1.pid /run/slurmd-n2.pid; do
  [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
done
pkill -x slurmctld 2>/dev/null; pkill -x slurmd 2>/dev/null
for _ in $(seq 50); do pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null || break; sleep 0.1; done
pkill -9 -x slurmctld 2>/dev/null; pkill -9 -x slurmd 2>/dev/null
# Steps whose daemon is gone.
pkill -9 -x slurmstepd 2>/dev/null
exit 0
