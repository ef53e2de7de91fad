#!/usr/bin/env bash
# A single-node SLURM on this machine for hpsearch's SLURM tests (CI runs it; a developer can
# too), as root on Debian without systemd: munge, slurmctld and slurmd from Debian's packages,
# 2 simulated GPUs: device nodes (mknod c 195 N) that SLURM allocates, setting each job's
# CUDA_VISIBLE_DEVICES; no CUDA runs on them. They live in $RUN/dev, not /dev, so that no other
# test (nor NVML, nor a framework) ever sees a GPU that is not there. Idempotent: a cluster
# already up is left as it is.
#   .ci/slurm-up.sh         install if needed, start, wait until the node takes jobs
#   .ci/slurm-up.sh down    stop the daemons, remove the device nodes
#   HPSEARCH_SLURM_GPUS=8 .ci/slurm-up.sh    8 simulated GPUs instead of 2 (the benchmark's)
set -euo pipefail
CONF=/etc/slurm
RUN=/run/hpsearch-slurm
GPUS=${HPSEARCH_SLURM_GPUS:-2}  # bench/slurm.py asks for 8 (after a `down`)
# CPUs the node declares (SlurmdParameters=config_overrides): more than the machine has, so
# the tests' short jobs run several at once on 2 cores, as they would on a real node.
CPUS=8

down() {  # the daemons ended (SIGTERM to all, SIGKILL after 10 s), the device nodes removed
    local pids=() daemon
    for daemon in slurmd slurmctld munged; do
        [ -f "$RUN/$daemon.pid" ] && pids+=("$(cat "$RUN/$daemon.pid")")
        rm -f "$RUN/$daemon.pid"
    done
    if [ ${#pids[@]} -gt 0 ]; then
        kill "${pids[@]}" 2>/dev/null || true
        for _ in $(seq 50); do
            alive=0
            for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
            [ $alive = 1 ] || break
            sleep 0.2
        done
        kill -9 "${pids[@]}" 2>/dev/null || true
    fi
    rm -rf "$RUN/dev"
}

usable() {  # the node takes jobs (idle, or busy with some)
    sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated|planned|completing)'
}

if [ "${1:-}" = down ]; then
    down
    exit 0
fi

# Up already? (sinfo asked with no controller running takes ~10 s to give up.)
if [ -f "$RUN/slurmctld.pid" ] && kill -0 "$(cat "$RUN/slurmctld.pid")" 2>/dev/null && usable; then
    exit 0
fi

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge \
        >/dev/null
fi
down  # a half-started cluster from before: start clean

mkdir -p "$RUN/dev" /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
chown munge:munge /run/munge
for ((i = 0; i < GPUS; i++)); do mknod -m 666 "$RUN/dev/nvidia$i" c 195 "$i"; done
[ -s /etc/munge/munge.key ] || mungekey --create --keyfile /etc/munge/munge.key
chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
runuser -u munge -- munged --pid-file=/run/munge/munged.pid
cp /run/munge/munged.pid "$RUN/munged.pid"

HOST=$(hostname)
# Each ended job's record, a line each (no accounting database here: sacct does not answer);
# bench/slurm.py reads its jobs' start and end times there.
JOBCOMP=/var/log/slurm/jobcomp.log
MEMORY=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
cat > "$CONF/slurm.conf" <<CONF
ClusterName=hpsearch
SlurmctldHost=$HOST
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/pgid
MpiDefault=none
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
GresTypes=gpu
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ReturnToService=2
SchedulerParameters=sched_interval=1
MinJobAge=30
JobCompType=jobcomp/filetxt
JobCompLoc=$JOBCOMP
KillWait=2
DefMemPerCPU=256
NodeName=$HOST CPUs=$CPUS RealMemory=$MEMORY Gres=gpu:$GPUS State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
echo "Name=gpu File=$RUN/dev/nvidia[0-$((GPUS - 1))]" > "$CONF/gres.conf"

slurmctld
slurmd
for _ in $(seq 100); do
    if usable; then
        exit 0
    fi
    sleep 0.2
done
echo "slurm-up: the node takes no job after 20 s: $(sinfo -h -o '%T %E' 2>&1)" >&2
tail -n 5 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2
exit 1
