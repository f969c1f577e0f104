#!/usr/bin/env bash
# A one-node SLURM on 127.0.0.1 for kappa's tests (Debian's slurm-wlm + munge).
#
#   slurm_local.sh install        apt-get install slurm-wlm munge when missing (root + apt)
#   slurm_local.sh start [DIR]    write DIR/slurm.conf, start munged, slurmctld, slurmd;
#                                 wait until sinfo shows the node idle (idempotent)
#   slurm_local.sh stop [DIR]     stop the three daemons started for DIR
#   slurm_local.sh env [DIR]      print `export SLURM_CONF=...` for a shell
#
# DIR defaults to $KAPPA_SLURM_DIR, else /tmp/kappa-slurm. Everything lives under it
# (config, state, spool, logs, munge socket), so it never touches a machine's own SLURM:
# its own ports ($KAPPA_SLURM_PORT and the next one, default 16817/16818) and its own munge
# socket. Clients find it through SLURM_CONF=DIR/slurm.conf.
#
# The cluster: one node (this host's short name, address 127.0.0.1) with
# $KAPPA_SLURM_CPUS CPUs (default 4, whatever the hardware: config_overrides), no cgroups
# (proctrack/linuxproc, task/none: containers rarely allow them), select/cons_tres by CPU,
# no accounting database (sacct answers "disabled"; finished jobs stay in `scontrol show
# job` for MinJobAge seconds and in DIR/log/jobcomp.txt). Three partitions: `debug`
# (default), `preemptible`, and `urgent`, a higher PriorityTier whose jobs preempt those
# of `preemptible` (what a cluster's high-priority queue does). Two fake GPUs
# (Gres=gpu:2 backed by links to /dev/null and /dev/zero under DIR/dev): SLURM counts and
# hands them out (CUDA_VISIBLE_DEVICES in the job), nothing more; they are labelled fake
# in `scontrol show node` (Features=fakegpu). `start` restarts a running cluster whose
# configuration differs from the one it writes.
#
# Exit status of start: 0 when the node is idle; 3 when SLURM or munge is not installed;
# 4 when a daemon did not come up (the last lines of its log are printed).
set -u
cmd=${1:-start}
DIR=${2:-${KAPPA_SLURM_DIR:-/tmp/kappa-slurm}}
PORT=${KAPPA_SLURM_PORT:-16817}
CPUS=${KAPPA_SLURM_CPUS:-4}
CONF="$DIR/slurm.conf"

say() { echo "slurm_local: $*" >&2; }

install_packages() {
  local need=()
  command -v slurmctld >/dev/null 2>&1 || need+=(slurm-wlm)
  command -v munged >/dev/null 2>&1 || need+=(munge)
  [ ${#need[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing ${need[*]}"
    apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 \
      || say "could not install ${need[*]}; the SLURM tests will be skipped"
  else
    say "missing ${need[*]} (not root or no apt); the SLURM tests will be skipped"
  fi
  return 0
}

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

write_conf() {  # $1: slurm.conf to write, $2: gres.conf to write
  local host
  host=$(hostname -s)
  mkdir -p "$DIR"/{state,spool,log,run,munge,dev}
  chmod 700 "$DIR/munge"
  # SLURM wants a character device per GPU: links to /dev/null and /dev/zero stand in.
  ln -sfn /dev/null "$DIR/dev/gpu0"; ln -sfn /dev/zero "$DIR/dev/gpu1"
  cat >"$1" <<EOF
# Written by scripts/slurm_local.sh: a one-node test cluster on 127.0.0.1.
ClusterName=kappa-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/slurmd-%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
SlurmdParameters=config_overrides
GresTypes=gpu
MpiDefault=none
ReturnToService=2
# Fast turnaround for tests: a finished job stays visible to scontrol for 10 minutes; a
# cancelled or timed-out job gets SIGKILL 2 s after SIGTERM.
MinJobAge=600
KillWait=2
InactiveLimit=0
OverTimeLimit=0
JobRequeue=1
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
NodeName=$host NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=1000 Gres=gpu:2 Features=fakegpu State=UNKNOWN
# Only jobs of "preemptible" can be preempted (by jobs of "urgent"): tests that preempt
# never touch the jobs other tests run in "debug" at the same time.
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=OFF
PartitionName=preemptible Nodes=$host MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE
PartitionName=urgent Nodes=$host MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF
EOF
  cat >"$2" <<EOF
# Fake GPUs: links to /dev/null and /dev/zero, so SLURM can count and assign them. No device behind them.
NodeName=$host Name=gpu File=$DIR/dev/gpu[0-1]
EOF
}

node_idle() {
  local state
  state=$(SLURM_CONF="$CONF" sinfo -h -N -o '%t' 2>/dev/null | head -n1)
  case "$state" in idle|mix|alloc) return 0 ;; *) return 1 ;; esac
}

fail() {  # $1: daemon name
  say "$1 did not come up; last lines of its log:"
  tail -n 15 "$DIR/log/$1.log" >&2 2>/dev/null
  exit 4
}

start() {
  if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 \
      || ! command -v munged >/dev/null 2>&1; then
    say "slurm-wlm or munge is not installed (run: $0 install, as root with apt)"
    exit 3
  fi
  mkdir -p "$DIR"
  exec 9>"$DIR/.lock"
  flock 9  # two test processes starting at once: the second waits and finds it running
  write_conf "$CONF.new" "$DIR/gres.conf.new"
  if cmp -s "$CONF.new" "$CONF" && cmp -s "$DIR/gres.conf.new" "$DIR/gres.conf"; then
    rm -f "$CONF.new" "$DIR/gres.conf.new"
    if pid_alive "$DIR/run/munged.pid" && pid_alive "$DIR/run/slurmctld.pid" \
        && pid_alive "$DIR/run/slurmd.pid" && node_idle; then
      return 0
    fi
  else
    # A cluster started from another configuration (an older version of this script)
    # is restarted with this one.
    [ -f "$CONF" ] && say "the configuration changed: restarting the cluster" && stop
    mv "$CONF.new" "$CONF"
    mv "$DIR/gres.conf.new" "$DIR/gres.conf"
  fi
  local key=/etc/munge/munge.key
  if [ ! -r "$key" ]; then
    key="$DIR/munge/munge.key"
    [ -f "$key" ] || { head -c 1024 /dev/urandom >"$key" && chmod 400 "$key"; }
  fi
  # The daemons get none of our descriptors: not the lock (fd 9, or the next start would
  # wait for them forever), not a caller's pipes (a test runner would wait for their EOF).
  if ! pid_alive "$DIR/run/munged.pid"; then
    # --force: root-owned key and folders are fine for a throwaway test cluster.
    munged --force --key-file="$key" --socket="$DIR/munge/munge.socket" \
      --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
      --seed-file="$DIR/munge/munge.seed" </dev/null >/dev/null 2>&1 9>&- || fail munged
  fi
  export SLURM_CONF="$CONF"
  pid_alive "$DIR/run/slurmctld.pid" || slurmctld -f "$CONF" </dev/null >/dev/null 2>&1 9>&- || fail slurmctld
  pid_alive "$DIR/run/slurmd.pid" || slurmd -f "$CONF" </dev/null >/dev/null 2>&1 9>&- || fail slurmd
  local i
  for i in $(seq 1 120); do
    if node_idle; then
      return 0
    fi
    # A node left DOWN/DRAIN by an earlier run comes back by hand.
    if [ $((i % 10)) = 0 ]; then
      scontrol update NodeName="$(hostname -s)" State=RESUME >/dev/null 2>&1 || true
    fi
    sleep 0.5
  done
  pid_alive "$DIR/run/slurmctld.pid" || fail slurmctld
  fail slurmd
}

stop() {
  local d
  for d in slurmd slurmctld munged; do
    if pid_alive "$DIR/run/$d.pid"; then
      kill "$(cat "$DIR/run/$d.pid")" 2>/dev/null
      for _ in $(seq 1 50); do pid_alive "$DIR/run/$d.pid" || break; sleep 0.1; done
    fi
  done
  return 0
}

case "$cmd" in
  install) install_packages ;;
  start) start && say "running: export SLURM_CONF=$CONF" ;;
  stop) stop ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  *) echo "usage: $0 install|start|stop|env [DIR]" >&2; exit 2 ;;
esac
