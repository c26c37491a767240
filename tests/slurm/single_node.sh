#!/bin/sh
# A single-node Slurm on this machine, from Debian's packages (slurmctld, slurmd,
# munge), for dac's Slurm tests (tests/test_slurm.py). Idempotent: what is installed
# and running already is kept. Needs root and apt. Prints "ready" once `sinfo` shows
# the node idle; on failure, one line saying what failed, and exit status 1.
#
#   sh tests/slurm/single_node.sh          # install, configure, start
#   sh tests/slurm/single_node.sh stop     # stop the daemons it started
set -u
CONF=/etc/slurm/slurm.conf
HOST=$(hostname)
fail() { echo "slurm: $*"; exit 1; }

# stop: end the daemons and wait until they are gone (a dying one still answers
# pgrep, and the next start would take it for running)
if [ "${1:-}" = stop ]; then
    pkill -x slurmd; pkill -x slurmctld; pkill -x munged
    i=0
    while { pgrep -x slurmd || pgrep -x slurmctld || pgrep -x munged; } >/dev/null && \
            [ $i -lt 100 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    exit 0
fi
[ "$(id -u)" = 0 ] || fail "needs root (installs packages, starts daemons)"
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || \
        ! command -v munged >/dev/null || ! command -v sbatch >/dev/null; then
    command -v apt-get >/dev/null || fail "no apt-get to install slurmctld, slurmd, munge"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge \
        >/tmp/dac-slurm-apt.log 2>&1 || {
        apt-get update >>/tmp/dac-slurm-apt.log 2>&1
        apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge \
            >>/tmp/dac-slurm-apt.log 2>&1
    } || fail "apt-get install slurmctld slurmd slurm-client munge failed (see /tmp/dac-slurm-apt.log)"
fi

# munge: the key, then the daemon as its own user
if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
fi
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge
chmod 400 /etc/munge/munge.key
chmod 700 /etc/munge
if ! pgrep -x munged >/dev/null; then
    runuser -u munge -- /usr/sbin/munged || fail "munged did not start"
fi

# one node, more CPUs than the machine has (dac's tests run 3 ranks on 2 cores),
# no cgroups (containers lack them): processes tracked by their parents
CPUS=8
mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
cat >"$CONF" <<CONF
ClusterName=dac
SlurmctldHost=$HOST
SlurmUser=root
AuthType=auth/munge
MpiDefault=pmi2
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
SlurmdParameters=config_overrides
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
NodeName=$HOST CPUs=$CPUS State=UNKNOWN
PartitionName=dac Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
pgrep -x slurmctld >/dev/null || slurmctld || fail "slurmctld did not start (see /var/log/slurm/slurmctld.log)"
pgrep -x slurmd >/dev/null || slurmd || fail "slurmd did not start (see /var/log/slurm/slurmd.log)"
end=$(($(date +%s) + 60))
while [ "$(date +%s)" -lt $end ]; do
    state=$(timeout 5 sinfo -h -n "$HOST" -o %T 2>/dev/null)
    case "$state" in
        idle*|mix*|alloc*) echo ready; exit 0 ;;
        down*|drain*) timeout 5 scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 ;;
    esac
    sleep 0.5
done
fail "the node did not become idle (state: ${state:-none}; see /var/log/slurm/)"
