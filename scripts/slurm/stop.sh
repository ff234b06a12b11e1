#!/usr/bin/env bash
# Stop the test Slurm started by start.sh (daemons only; its state folder stays for inspection).
set -u
grep -qx "# grpo-power test cluster" /etc/slurm/slurm.conf 2>/dev/null || exit 0  # not ours
for daemon in slurmd slurmctld slurmdbd; do pkill -x "$daemon" 2>/dev/null; done
for _ in $(seq 40); do pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null || break; sleep 0.25; done
pkill -x mariadbd 2>/dev/null
pkill -x munged 2>/dev/null
exit 0
