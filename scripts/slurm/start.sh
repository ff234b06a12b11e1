#!/usr/bin/env bash
# Start a real single-node Slurm 22.05 (with accounting) on this machine, for the test suite.
# Needs root and Debian's packages (installed here when missing): slurm-wlm, slurmdbd, munge,
# mariadb-server. Idempotent: a running cluster is left as it is. Stop it with stop.sh.
# No systemd: the daemons are started directly. Two fake GPUs are a gres whose File= are symlinks
# to /dev/null (Slurm refuses regular files), so jobs asking for a GPU are scheduled.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "start.sh: needs root" >&2; exit 1; }
host=$(hostname -s)
state=/var/lib/grpo-power-slurm
cluster=grpotest
account=grpo

if ! command -v slurmctld >/dev/null || ! command -v slurmdbd >/dev/null \
   || ! command -v munged >/dev/null || ! command -v mariadbd >/dev/null; then
  echo "installing slurm-wlm, slurmdbd, munge and mariadb-server"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm slurmdbd munge mariadb-server >/dev/null
fi

marker="# grpo-power test cluster"

# wait_for SECONDS WHAT COMMAND...: poll COMMAND every 0.5 s; fail loudly when it never succeeds.
wait_for() {
  local seconds=$1 what=$2; shift 2
  for _ in $(seq $((seconds * 2))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  echo "start.sh: $what did not come up within ${seconds} s (logs: $state/log)" >&2
  exit 1
}
running() { ps -C "$1" -o stat= 2>/dev/null | grep -qv Z; }  # a live process, not a zombie
if [ -f /etc/slurm/slurm.conf ] && ! grep -qx "$marker" /etc/slurm/slurm.conf; then
  echo "start.sh: /etc/slurm/slurm.conf exists and is not this test cluster's: left alone" >&2
  exit 1
fi

if scontrol ping 2>/dev/null | grep -q UP && sinfo -h -o %T 2>/dev/null | grep -qE 'idle|mix|alloc'; then
  echo "slurm already running"; exit 0
fi

mkdir -p "$state"/{ctld,d,log} /run/munge /run/mysqld /etc/slurm
chown munge:munge /run/munge; chmod 755 /run/munge
chown mysql:mysql /run/mysqld

# munge
[ -s /etc/munge/munge.key ] || { mungekey --create --keyfile /etc/munge/munge.key 2>/dev/null \
  || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none; }
chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
munge -n >/dev/null 2>&1 || runuser -u munge -- /usr/sbin/munged --force
wait_for 10 munged munge -n

# mariadb for slurmdbd
if ! mariadb -e 'SELECT 1' >/dev/null 2>&1; then
  [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql >/dev/null
  setsid runuser -u mysql -- mariadbd --socket=/run/mysqld/mysqld.sock \
    >"$state/log/mariadb.log" 2>&1 < /dev/null &
  wait_for 30 mariadb mariadb -e 'SELECT 1'
fi
mariadb -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm';
            GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"

cpus=$(nproc)
mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
ln -sf /dev/null /dev/grpo-fake-gpu0; ln -sf /dev/null /dev/grpo-fake-gpu1

cat > /etc/slurm/slurmdbd.conf <<CONF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
LogFile=$state/log/slurmdbd.log
PidFile=$state/slurmdbd.pid
CONF
chown root:root /etc/slurm/slurmdbd.conf; chmod 600 /etc/slurm/slurmdbd.conf

cat > /etc/slurm/slurm.conf <<CONF
$marker
ClusterName=$cluster
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
AuthInfo=cred_expire=5
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=2
DefMemPerCPU=1000
GresTypes=gpu
ReturnToService=2
MinJobAge=600
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/d
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStorageTRES=gres/gpu
JobAcctGatherType=jobacct_gather/none
AccountingStoreFlags=job_comment
JobCompType=jobcomp/none
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
SlurmctldParameters=preempt_send_user_signal
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=1 GraceTime=10
PartitionName=high Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
CONF
cat > /etc/slurm/gres.conf <<CONF
NodeName=$host Name=gpu File=/dev/grpo-fake-gpu[0-1]
CONF
rm -f /etc/slurm/cgroup.conf  # proctrack/linuxproc and task/none need no cgroups

running slurmdbd || slurmdbd
wait_for 30 slurmdbd sacctmgr -n list cluster
running slurmctld || slurmctld
wait_for 30 slurmctld scontrol ping
running slurmd || slurmd
node_ready() { sinfo -h -o %T | grep -qE '^(idle|mix|alloc)'; }
wait_for 30 "the node" node_ready
sacctmgr -i add account "$account" Cluster="$cluster" >/dev/null 2>&1 || true
sacctmgr -i add user root Account="$account" >/dev/null 2>&1 || true
sinfo
echo "slurm up: cluster $cluster, account $account, partitions debug (default) and high"
