#!/usr/bin/env bash
# Starts a two-node SLURM 22.05 cluster on this machine for the tests: munge, slurmctld, and one
# slurmd per node name (n1, n2 on ports 17001/17002), four fake GPUs (character devices) split
# between them, a low-priority `debug` partition and a `high` one that preempts it.
# Needs root and Debian's slurm-wlm + munge. Idempotent: a running cluster is restarted.
set -euo pipefail
# The daemons started here outlive this script: they must not inherit its open files (a lock a
# test runner holds, a pipe a parent waits on), or those would stay held for as long as they run.
for fd in /proc/$$/fd/*; do
  fd=${fd##*/}
  if [ "$fd" -gt 2 ] && [ "$fd" != 255 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
done
HOST=$(hostname -s)
here=$(cd "$(dirname "$0")" && pwd)
"$here/slurm-stop.sh" >/dev/null 2>&1 || true
mkdir -p /etc/slurm /var/spool/slurmctld /var/log/slurm /run/munge
chown munge: /run/munge 2>/dev/null || true
for i in 0 1 2 3; do [ -e /dev/fakegpu$i ] || mknod -m 666 /dev/fakegpu$i c 1 3; done
sed "s/@HOST@/$HOST/g" "$here/slurm.conf" > /etc/slurm/slurm.conf
cp "$here/gres.conf" /etc/slurm/gres.conf
rm -f /var/spool/slurmctld/* /var/log/slurm/jobcomp.log 2>/dev/null || true
# A step left from an earlier cluster would collide with a new job of the same id.
pkill -9 -x slurmstepd 2>/dev/null || true
if ! munge -n >/dev/null 2>&1; then
  [ -f /etc/munge/munge.key ] || (mungekey --create 2>/dev/null || create-munge-key -f)
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
fi
/usr/sbin/slurmctld
/usr/sbin/slurmd -N n1
/usr/sbin/slurmd -N n2
for _ in $(seq 100); do
  states=$(sinfo -h -N -o '%T' 2>/dev/null | sort -u | tr '\n' ' ')
  [ "$states" = "idle " ] && { echo "slurm up: $(sinfo -h -N -o '%N %T %G' | tr '\n' ';')"; exit 0; }
  sleep 0.1
done
echo "slurm did not come up: $(sinfo -N 2>&1)" >&2
tail -5 /var/log/slurm/slurmctld.log >&2 || true
exit 1
