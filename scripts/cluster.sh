#!/usr/bin/env bash
# Emulated cluster nodes on one machine, for Hark's tests and by hand
# (docs/cluster.md, "Testing on emulated nodes").
#
#   cluster.sh up ID N [--owner PID]   N nodes n1..nN (N <= 200)
#   cluster.sh exec ID NODE CMD...     run CMD in NODE (all its namespaces, its clock, this cwd)
#   cluster.sh rsh ID [SSH-OPTS] NODE CMD...   ssh-like: CMD as one shell line, a login-like env
#   cluster.sh agent ID                prints the rsh agent's path (for plm_rsh_agent, -bootstrap-exec)
#   cluster.sh hosts ID                prints the node names, one a line
#   cluster.sh offset ID NODE          prints NODE's CLOCK_MONOTONIC offset in nanoseconds
#   cluster.sh private ID NODE DIR     mounts an empty tmpfs over DIR in NODE only
#   cluster.sh slurm ID                munged per node, slurmctld on n1, slurmd per node
#   cluster.sh down ID                 kills every process of the cluster, removes all of it
#   cluster.sh reap                    removes clusters whose owner died (`up` does it too)
#
# A node is a long-lived holder process in its own network namespace
# (`ip netns`), with new UTS, mount, IPC and time namespaces: its own
# hostname, /tmp, /dev/shm, /etc/hosts, /run/munge and CLOCK_MONOTONIC
# (node k runs k*1000 s ahead of the host). Everything else of the file
# system is shared, so the checkout and the build are at the same path on
# every node. The nodes' addresses (10.77.0.k/24) exist only inside the
# cluster's namespaces: the bridge joining them lives in a namespace of
# its own, so the host gets no address and no route. Several clusters can
# be up at once (their namespaces are apart); names carry the ID.
#
# A cluster started with --owner PID is removed by the next `up` or `reap`
# once that process is gone (a test killed before it could tear down).
set -euo pipefail

# The agent's path runs no program but nsenter (under a profiler, every
# program it ran would look like one of the job's): no command
# substitutions there, only builtins.
SELF=$0
STATE_ROOT=${HARK_CLUSTER_STATE:-/run/hark-cluster}
SUBNET=10.77.0
OFFSET_STEP_S=1000

die() {
    echo "cluster.sh: $*" >&2
    exit 1
}

usage() {
    sed -n '5,14p' "$SELF" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

check_id() {
    [[ $1 =~ ^[A-Za-z0-9_]{1,24}$ ]] ||
        die "bad cluster id '$1': use 1 to 24 letters, digits or _"
}

st() { echo "$STATE_ROOT/$1"; }

# Sets K to the node index of n3, 3, or 10.77.0.3.
node_index() {
    local id=$1 node=$2 n k
    read -r n 2>/dev/null <"$STATE_ROOT/$id/nodes" || die "no cluster '$id' (cluster.sh up $id N)"
    case $node in
    n[0-9]*) k=${node#n} ;;
    "$SUBNET".[0-9]*) k=${node##*.} ;;
    [0-9]*) k=$node ;;
    *) k= ;;
    esac
    [[ $k =~ ^[0-9]+$ ]] && ((k >= 1 && k <= n)) ||
        die "no node '$node' in cluster '$id' (nodes n1..n$n)"
    K=$k
}

# Sets HOLDER to the pid of node K's holder.
holder() {
    local pid
    read -r pid 2>/dev/null <"$STATE_ROOT/$1/n$2/holder.pid" || die "node n$2 of '$1' has no holder"
    kill -0 "$pid" 2>/dev/null || die "node n$2 of '$1' is gone (its holder $pid died); cluster.sh down $1"
    HOLDER=$pid
}

enter() { # ID K DIR CMD...: the node's namespaces, cwd DIR
    local id=$1 k=$2 dir=$3 pid
    shift 3
    holder "$id" "$k"
    pid=$HOLDER
    # setns into a mount namespace needs a single-threaded caller: keep
    # preloaded libraries (a profiler's probe and its threads) off nsenter
    # itself, and give them back to the command.
    if [ -n "${LD_PRELOAD:-}" ]; then
        local preload=$LD_PRELOAD
        unset LD_PRELOAD
        exec nsenter -t "$pid" --net --uts --mount --ipc --time --wd="$dir" \
            -- env LD_PRELOAD="$preload" "$@"
    fi
    exec nsenter -t "$pid" --net --uts --mount --ipc --time --wd="$dir" -- "$@"
}

on_node() { # ID K CMD...: as enter, from /, returning
    (enter "$1" "$2" / "${@:3}")
}

# A process's start time (clock ticks after boot): with its pid, an
# identity that survives pid reuse. Empty if there is no such process.
proc_identity() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    stat=${stat##*) }
    # shellcheck disable=SC2086
    set -- $stat
    echo "${20}"
}

owner_alive() { # "PID STARTTIME"
    local pid=$1 start=$2
    [ -r "/proc/$pid/stat" ] || return 1
    [ "$(proc_identity "$pid")" = "$start" ]
}

cmd_up() {
    local id=$1 n=$2 owner=manual
    shift 2
    check_id "$id"
    [[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 200)) || die "bad node count '$n': 1 to 200"
    while [ $# -gt 0 ]; do
        case $1 in
        --owner)
            [[ ${2:-} =~ ^[0-9]+$ ]] && [ -r "/proc/$2/stat" ] ||
                die "--owner needs the pid of a live process, not '${2:-}'"
            owner="$2 $(proc_identity "$2")"
            shift 2
            ;;
        *) die "unknown option '$1' for up" ;;
        esac
    done
    [ "$(id -u)" -eq 0 ] || die "needs root (network, mount and time namespaces)"
    SELF=$(readlink -f "$0")
    for t in ip unshare nsenter; do
        command -v "$t" >/dev/null || die "needs '$t' (scripts/deps.sh installs it)"
    done
    cmd_reap
    local s
    s=$(st "$id")
    mkdir -p "$STATE_ROOT"
    mkdir "$s" 2>/dev/null || die "cluster '$id' exists already (cluster.sh down $id)"
    # The state directory comes first: a namespace named after an ID
    # without one is a leftover, which `reap` removes.
    echo "$owner" >"$s/owner"
    echo "$n" >"$s/nodes"
    # On any failure (a command, or die), remove what was made.
    trap 'echo "cluster.sh: up $id failed; removing it" >&2; cmd_down "$id"' EXIT
    {
        echo "127.0.0.1 localhost"
        for ((k = 1; k <= n; k++)); do echo "$SUBNET.$k n$k"; done
    } >"$s/hosts"
    mkdir -p "$s/slurm"
    host_cgroups >"$s/cgroups"
    local br="hark-$id-br"
    ip netns add "$br"
    ip -n "$br" link set lo up
    ip -n "$br" link add br0 type bridge
    ip -n "$br" link set br0 up
    for ((k = 1; k <= n; k++)); do
        node_up "$id" "$k"
    done
    for ((k = 1; k <= n; k++)); do
        wait_for_holder "$id" "$k"
    done
    # One bash process that sources this script: a profiler sees the
    # agent as one program, as it would see ssh.
    printf '#!/bin/bash\n# rsh agent of emulated cluster %s (scripts/cluster.sh)\nset -- rsh %q "$@"\nsource %q\n' \
        "$id" "$id" "$SELF" >"$s/rsh"
    chmod 755 "$s/rsh"
    trap - EXIT
}

node_up() {
    local id=$1 k=$2 s ns br="hark-$1-br"
    s=$(st "$id")
    ns="hark-$id-n$k"
    mkdir -p "$s/n$k/munge"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$br" link add "v$k" type veth peer name eth0 netns "$ns"
    ip -n "$br" link set "v$k" master br0 up
    ip -n "$ns" addr add "$SUBNET.$k/24" dev eth0
    ip -n "$ns" link set eth0 up
    # The holder: new UTS, mount, IPC and time namespaces inside the
    # node's network namespace; its children get the node's clock.
    setsid ip netns exec "$ns" unshare --uts --mount --ipc --propagation private \
        --time --monotonic "$((k * OFFSET_STEP_S))" --fork \
        "$SELF" _hold "$id" "$k" </dev/null >"$s/n$k/holder.log" 2>&1 &
}

wait_for_holder() {
    local id=$1 k=$2 s i
    s=$(st "$id")
    for ((i = 0; i < 200; i++)); do
        [ -s "$s/n$k/holder.pid" ] && return 0
        sleep 0.05
    done
    die "node n$k of '$id' did not come up: $(cat "$s/n$k/holder.log" 2>/dev/null)"
}

# The host's cgroup mounts under /sys/fs/cgroup: "MOUNTPOINT FSTYPE OPTS",
# OPTS the controllers (or name=) of a v1 hierarchy, "-" for cgroup2.
host_cgroups() {
    local line pre post
    while read -r line; do
        pre=${line%% - *}
        post=${line#* - }
        # shellcheck disable=SC2086
        set -- $pre
        local mp=$5
        # shellcheck disable=SC2086
        set -- $post
        case $1:$mp in
        cgroup:/sys/fs/cgroup/*) echo "$mp cgroup $(echo "$3" | tr , '\n' | grep -vE '^(rw|ro)$' | paste -sd,)" ;;
        cgroup2:/sys/fs/cgroup*) echo "$mp cgroup2 rw" ;;
        esac
    done </proc/self/mountinfo
}

# `ip netns exec` gave the node a sysfs of its own, without the cgroup
# mounts slurmd insists on: mount the host's hierarchies (listed in
# STATE/cgroups) again.
mount_cgroups() {
    local mp fstype opts
    while read -r mp fstype opts; do
        if [ "$mp" = /sys/fs/cgroup ] && [ "$fstype" != cgroup2 ]; then continue; fi
        if ! mkdir -p "$mp" 2>/dev/null; then
            mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup || return 1
            mkdir -p "$mp" || return 1
        fi
        mount -t "$fstype" -o "$opts" "$fstype" "$mp" || return 1
    done <"$1/cgroups"
}

# Inside the new namespaces: make the node's private files, then hold.
cmd_hold() {
    local id=$1 k=$2 s
    s=$(st "$id")
    hostname "n$k"
    mount -t tmpfs -o mode=1777 hark-node /tmp
    mount -t tmpfs -o mode=1777 hark-node /dev/shm
    mount --bind "$s/hosts" /etc/hosts
    [ -d /run/munge ] || mkdir -p /run/munge
    mount --bind "$s/n$k/munge" /run/munge
    [ -d /etc/slurm ] || mkdir -p /etc/slurm
    mount --bind "$s/slurm" /etc/slurm
    mount_cgroups "$s" || echo "cluster.sh: n$k lacks cgroup mounts (only slurmd needs them)" >&2
    echo $$ >"$s/n$k/holder.pid.tmp"
    mv "$s/n$k/holder.pid.tmp" "$s/n$k/holder.pid"
    exec sleep infinity
}

cmd_exec() {
    local id=$1 k
    check_id "$id"
    node_index "$id" "$2"
    k=$K
    shift 2
    [ $# -gt 0 ] || die "exec needs a command"
    enter "$id" "$k" "$PWD" "$@"
}

# ssh's conventions: options, the host, then words joined into one line
# for the remote shell, run in a fresh login-like environment (ssh passes
# no variables), from the home directory.
cmd_rsh() {
    local id=$1 k
    shift
    check_id "$id"
    while [ $# -gt 0 ]; do
        case $1 in
        -[oplieFcmJLRDwbBQSW]) shift 2 ;;
        -?*) shift ;;
        *) break ;;
        esac
    done
    [ $# -gt 0 ] || die "rsh needs a host"
    local host=$1
    shift
    host=${host#*@}
    node_index "$id" "$host"
    k=$K
    [ $# -gt 0 ] || die "rsh needs a command (no interactive shells)"
    # The caller's home and name stand for the passwd entry ssh would read.
    local home=${HOME:-/} user=${USER:-${LOGNAME:-}}
    if [ -z "$user" ]; then
        if [ "$EUID" -eq 0 ]; then user=root; else user=$(id -un); fi
    fi
    enter "$id" "$k" "$home" env -i HOME="$home" USER="$user" \
        LOGNAME="$user" SHELL=/bin/sh \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        /bin/sh -c "$*"
}

cmd_offset() {
    local id=$1 k pid
    check_id "$id"
    node_index "$id" "$2"
    k=$K
    holder "$id" "$k"
    pid=$HOLDER
    local name secs nanos
    while read -r name secs nanos; do
        if [ "$name" = monotonic ]; then echo $((secs * 1000000000 + nanos)); fi
    done <"/proc/$pid/timens_offsets"
}

cmd_private() {
    local id=$1 k dir=$3
    check_id "$id"
    node_index "$id" "$2"
    k=$K
    [ -d "$dir" ] || die "no directory '$dir' to make private on n$k"
    enter "$id" "$k" / mount -t tmpfs -o mode=1777 hark-node "$dir"
}

cmd_hosts() {
    local n
    check_id "$1"
    n=$(cat "$(st "$1")/nodes" 2>/dev/null) || die "no cluster '$1'"
    for ((k = 1; k <= n; k++)); do echo "n$k"; done
}

# Slurm on the cluster: one munge key, munged on every node (its socket
# in the node's private /run/munge), slurmctld on n1, slurmd on every
# node, all as root, their files and logs under the state directory
# (slurm.conf is every node's /etc/slurm/slurm.conf). No cgroups:
# processes are tracked by their parentage (proctrack/linuxproc).
cmd_slurm() {
    local id=$1 s n k i
    check_id "$id"
    s=$(st "$id")
    n=$(cat "$s/nodes" 2>/dev/null) || die "no cluster '$id' (cluster.sh up $id N)"
    for t in munged slurmctld slurmd sinfo; do
        command -v "$t" >/dev/null || die "needs '$t' (scripts/deps.sh installs slurm-wlm and munge)"
    done
    [ -e "$s/slurm/slurm.conf" ] && die "Slurm already runs on cluster '$id'"
    head -c 1024 /dev/urandom >"$s/munge.key"
    chmod 400 "$s/munge.key"
    for ((k = 1; k <= n; k++)); do
        mkdir -p "$s/n$k/spool"
        on_node "$id" "$k" munged --force --socket=/run/munge/munge.socket.2 \
            --key-file="$s/munge.key" --pid-file=/run/munge/munged.pid \
            --seed-file=/run/munge/munged.seed --log-file="$s/n$k/munged.log" ||
            die "munged did not start on n$k: $(tail -3 "$s/n$k/munged.log" 2>/dev/null)"
    done
    mkdir -p "$s/slurmctld"
    slurm_conf "$s" "$n" >"$s/slurm/slurm.conf.tmp"
    mv "$s/slurm/slurm.conf.tmp" "$s/slurm/slurm.conf"
    on_node "$id" 1 slurmctld ||
        die "slurmctld did not start on n1: $(tail -5 "$s/n1/slurmctld.log" 2>/dev/null)"
    for ((k = 1; k <= n; k++)); do
        on_node "$id" "$k" slurmd ||
            die "slurmd did not start on n$k: $(tail -5 "$s/n$k/slurmd.log" 2>/dev/null)"
    done
    local idle=
    for ((i = 0; i < 300; i++)); do
        idle=$(on_node "$id" 1 sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)
        [ "$idle" -eq "$n" ] && return 0
        sleep 0.1
    done
    die "Slurm's nodes of '$id' are not idle after 30 s ($idle of $n): $(on_node "$id" 1 sinfo -N 2>&1 | tail -5); logs in $s/n*/"
}

slurm_conf() { # STATE N
    local s=$1 n=$2
    cat <<EOF
# Slurm on an emulated cluster, written by scripts/cluster.sh slurm.
ClusterName=hark
SlurmctldHost=n1
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$s/slurmctld
SlurmctldPidFile=$s/n1/slurmctld.pid
SlurmctldLogFile=$s/n1/slurmctld.log
SlurmdSpoolDir=$s/%n/spool
SlurmdPidFile=$s/%n/slurmd.pid
SlurmdLogFile=$s/%n/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
# Backfill, Slurm's default: heterogeneous jobs (srun ... : ...) need it.
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
# Take the CPUs below as given: the nodes share the host's few cores.
SlurmdParameters=config_overrides
KillWait=2
# The nodes share a loaded machine's few cores: Slurm's 10 s default for an
# answer between its daemons and srun is too short under the test suite.
MessageTimeout=60
MinJobAge=2
NodeName=n[1-$n] CPUs=4 State=UNKNOWN
PartitionName=nodes Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

# Every process in one of the cluster's network namespaces.
cluster_pids() {
    local id=$1 ns
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^hark-$id-(n[0-9]+|br)\$"); do
        ip netns pids "$ns" 2>/dev/null || true
    done
}

cmd_down() {
    local id=$1 s i pids
    check_id "$id"
    s=$(st "$id")
    for ((i = 0; i < 50; i++)); do
        pids=$(cluster_pids "$id" | sort -u)
        [ -z "$pids" ] && break
        # shellcheck disable=SC2086
        kill -KILL $pids 2>/dev/null || true
        sleep 0.1
    done
    [ -z "$pids" ] || echo "cluster.sh: processes of '$id' survive: $pids" >&2
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^hark-$id-(n[0-9]+|br)\$"); do
        ip netns del "$ns" 2>/dev/null || echo "cluster.sh: cannot remove namespace $ns" >&2
    done
    rm -rf "$s"
}

# Clusters whose owner is gone, and namespaces of no cluster.
cmd_reap() {
    [ -d "$STATE_ROOT" ] || mkdir -p "$STATE_ROOT"
    exec 9>"$STATE_ROOT/.reap.lock"
    flock 9
    local s id owner
    for s in "$STATE_ROOT"/*/; do
        [ -d "$s" ] || continue
        id=$(basename "$s")
        # A cluster being made has no owner file for a moment.
        if ! read -r owner 2>/dev/null <"$s/owner"; then
            [ -n "$(find "$s" -maxdepth 0 -mmin +1)" ] || continue
            owner="0 0"
        fi
        [ "$owner" = manual ] && continue
        # shellcheck disable=SC2086
        owner_alive $owner && continue
        echo "cluster.sh: removing cluster '$id' left by a run that died" >&2
        cmd_down "$id"
    done
    for ns in $(ip netns list | awk '{print $1}' | grep -E '^hark-[A-Za-z0-9_]+-(n[0-9]+|br)$'); do
        id=${ns#hark-}
        id=${id%-*}
        [ -d "$(st "$id")" ] && continue
        echo "cluster.sh: removing namespace $ns of no cluster" >&2
        # shellcheck disable=SC2046
        kill -KILL $(ip netns pids "$ns") 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
    exec 9>&-
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
up) [ $# -ge 2 ] || usage; cmd_up "$@" ;;
exec) [ $# -ge 3 ] || usage; cmd_exec "$@" ;;
rsh) [ $# -ge 2 ] || usage; cmd_rsh "$@" ;;
agent) [ $# -eq 1 ] || usage; check_id "$1"; [ -x "$(st "$1")/rsh" ] || die "no cluster '$1'"; echo "$(st "$1")/rsh" ;;
hosts) [ $# -eq 1 ] || usage; cmd_hosts "$1" ;;
offset) [ $# -eq 2 ] || usage; cmd_offset "$@" ;;
private) [ $# -eq 3 ] || usage; cmd_private "$@" ;;
slurm) [ $# -eq 1 ] || usage; cmd_slurm "$1" ;;
down) [ $# -eq 1 ] || usage; cmd_down "$1" ;;
reap) cmd_reap ;;
_hold) cmd_hold "$@" ;;
*) usage ;;
esac
