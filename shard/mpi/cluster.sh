#!/usr/bin/env bash
# A cluster on one machine: N simulated hosts, each a network namespace
# with a hostname of its own (a UTS namespace), joined by veth pairs to a
# bridge, with shaped links; mpirun starts each host's processes inside
# its namespace through a launcher agent (Open MPI's plm_rsh_agent), so
# Open MPI sees N nodes: shared memory between the processes of a host,
# TCP between hosts. Addresses exist only inside the namespaces this
# script creates; it removes everything it made when it ends.
#
# Usage: shard/mpi/cluster.sh [options] [--] COMMAND [ARGS...]
#
#   -n HOSTS      simulated hosts (default 2)
#   -p PROCS      processes per host (default 2)
#   --rate RATE   limit what each host sends to RATE (tc tbf, or netem
#                 with --delay: 10gbit, 1gbit, 500mbit)
#   --delay TIME  delay what each host sends by TIME (tc netem: 50us,
#                 200us; needs the kernel's sch_netem)
#   --loss PCT    drop PCT percent of the packets each host sends (tc
#                 netem if the kernel has it, else an nftables rule)
#   --shared DIR  bind-mount the directory DIR into every host (and the
#                 head) at the path GONOX_CLUSTER_SHARED, in a mount
#                 namespace of its own: a shared file system (NFS, say)
#                 the hosts see and the machine outside them does not
#                 (the path is an empty directory there)
#   --mpirun      run COMMAND under the cluster's mpirun (one process
#                 per slot: HOSTS x PROCS) instead of as it is
#
# COMMAND runs in a head namespace on the bridge with, in its environment,
# GONOX_CLUSTER_MPIRUN: an mpirun command line (hostfile, process
# count; the agent and the other MCA parameters are in OMPI_MCA_*
# variables, which mpirun --mca overrides) to start processes across the
# hosts, e.g.
#
#   shard/mpi/cluster.sh -n 2 -p 2 --rate 10gbit -- \
#     sh -c '$GONOX_CLUSTER_MPIRUN ./mlp -strategy dp -mesh dp=4'
#   shard/mpi/cluster.sh --mpirun ./mlp -strategy dp -mesh dp=4   # the same
#
# and GONOX_CLUSTER_HOSTS (the hosts' names), GONOX_CLUSTER_LINK (the
# command that takes host I's link down: $GONOX_CLUSTER_LINK I down),
# GONOX_CLUSTER_SHARED (with --shared: where the hosts see DIR).
# The exit status is COMMAND's; 77 means the machine forbids network
# namespaces (not root, or no ip netns) and nothing ran.
set -euo pipefail

hosts=2 procs=2 rate="" delay="" loss="" launch=0 shared=""
while (($#)); do
	case $1 in
	-n) hosts=$2; shift 2 ;;
	-p) procs=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--delay) delay=$2; shift 2 ;;
	--loss) loss=$2; shift 2 ;;
	--shared) shared=$2; shift 2 ;;
	--mpirun) launch=1; shift ;;
	--) shift; break ;;
	-*) echo "cluster.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
if (($# == 0)); then
	echo "usage: cluster.sh [-n HOSTS] [-p PROCS] [--rate RATE] [--delay TIME] [--loss PCT] [--shared DIR] [--mpirun] [--] COMMAND..." >&2
	exit 2
fi
if [ -n "$shared" ]; then
	if [ ! -d "$shared" ]; then
		echo "cluster.sh: --shared $shared: not a directory" >&2
		exit 2
	fi
	shared=$(cd "$shared" && pwd -P)
	case $shared in
	*[[:space:]\'\"\\]*) echo "cluster.sh: --shared $shared: a path without blanks or quotes, please" >&2; exit 2 ;;
	esac
fi

# Names unique to this run, short enough for interface names (15 bytes).
id=$(($$ % 10000))
pre=gx$id
subnet=10.$((200 + id % 50)).$((id % 250))
probe=${pre}probe
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! ip netns add "$probe" 2>/dev/null; then
	echo "cluster.sh: SKIP: cannot create network namespaces here (needs root and ip netns)" >&2
	exit 77
fi
ip netns del "$probe"

netem=0
if ip link add "${pre}t0" type veth peer name "${pre}t1" 2>/dev/null; then
	tc qdisc add dev "${pre}t0" root netem delay 1us 2>/dev/null && netem=1
	ip link del "${pre}t0" 2>/dev/null || true
fi
if [ -n "$delay" ] && ((!netem)); then
	echo "cluster.sh: --delay needs the netem qdisc (CONFIG_NET_SCH_NETEM), which this kernel lacks" >&2
	exit 2
fi
if [ -n "$loss" ] && ((!netem)) && ! command -v nft >/dev/null; then
	echo "cluster.sh: --loss needs the netem qdisc or nft (nftables), and this machine has neither" >&2
	exit 2
fi

work=$(mktemp -d /tmp/gonox-cluster.XXXXXX)
names=()
cleanup() {
	set +e
	for ns in $(ip netns list | awk '{print $1}' | grep "^${pre}-"); do
		# Processes left in a namespace (an aborted job's) are ended first.
		for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
		ip netns del "$ns"
		rm -rf "/etc/netns/$ns"
	done
	ip link del "${pre}br" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# tbf's burst must hold a timer tick of traffic: 4 ms of the rate.
burst() {
	awk -v r="$1" 'BEGIN {
		n = r + 0; u = tolower(r); sub(/^[0-9.]+/, "", u)
		m = (u ~ /^g/) ? 1e9 : (u ~ /^m/) ? 1e6 : (u ~ /^k/) ? 1e3 : 1
		b = n * m / 8 * 0.004; if (b < 65536) b = 65536
		printf "%d", b }'
}
# shape DEV in namespace NS (egress): rate, delay, loss.
shape() {
	local ns=$1 dev=$2
	if ((netem)) && [ -n "$delay$loss" ]; then
		local args=()
		[ -n "$delay" ] && args+=(delay "$delay")
		[ -n "$loss" ] && args+=(loss "$loss%")
		[ -n "$rate" ] && args+=(rate "$rate")
		ip netns exec "$ns" tc qdisc add dev "$dev" root netem "${args[@]}" limit 100000
	elif [ -n "$rate" ]; then
		ip netns exec "$ns" tc qdisc add dev "$dev" root tbf rate "$rate" burst "$(burst "$rate")" latency 50ms
	fi
	if [ -n "$loss" ] && ((!netem)); then
		ip netns exec "$ns" nft -f - <<-EOF
			table inet gonox {
				chain out {
					type filter hook output priority 0;
					oifname "$dev" numgen random mod 1000 < $(awk -v p="$loss" 'BEGIN { printf "%d", p * 10 }') counter drop
				}
			}
		EOF
	fi
}

ip link add "${pre}br" type bridge
ip link set "${pre}br" up
# Host i is namespace $pre-h$i at $subnet.(i+1), the head (mpirun) at .254.
addhost() {
	local i=$1 name=$2 addr=$3
	local ns=$pre-$name
	ip netns add "$ns"
	ip link add "${pre}v$i" type veth peer name "${pre}p$i"
	ip link set "${pre}p$i" netns "$ns"
	ip netns exec "$ns" ip link set "${pre}p$i" name eth0
	ip netns exec "$ns" ip addr add "$addr/24" dev eth0
	ip netns exec "$ns" ip link set eth0 up
	ip netns exec "$ns" ip link set lo up
	ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_retries2=4
	ip link set "${pre}v$i" master "${pre}br" up
	mkdir -p "/etc/netns/$ns"
	echo "$name" >"/etc/netns/$ns/hostname"
}
for ((i = 0; i < hosts; i++)); do
	names+=("${pre}h$i")
	addhost "$i" "${pre}h$i" "$subnet.$((i + 1))"
done
addhost head "${pre}head" "$subnet.254"
# Every namespace resolves every host (ip netns exec binds /etc/netns/NS/hosts).
{
	echo "127.0.0.1 localhost"
	for ((i = 0; i < hosts; i++)); do echo "$subnet.$((i + 1)) ${pre}h$i"; done
	echo "$subnet.254 ${pre}head"
} >"$work/hosts"
for ns in $(ip netns list | awk '{print $1}' | grep "^${pre}-"); do cp "$work/hosts" "/etc/netns/$ns/hosts"; done
# Each host's link shaped where it leaves the host.
for ((i = 0; i < hosts; i++)); do
	shape "$pre-${pre}h$i" eth0
done

# With --shared, every host (and the head) mounts DIR at $work/shared in
# a mount namespace of its own; outside them that path stays empty.
mountshared=""
if [ -n "$shared" ]; then
	mkdir "$work/shared"
	mountshared="mount --bind $shared $work/shared; "
	export GONOX_CLUSTER_SHARED=$work/shared
fi

# The launcher agent: Open MPI calls it as "agent HOST COMMAND..." as it
# would ssh; it runs the command in HOST's namespace, under HOST's name.
cat >"$work/agent" <<EOF
#!/bin/sh
host=\$1
shift
exec ip netns exec "$pre-\$host" unshare --uts --mount sh -c '${mountshared}hostname "\$0"; eval "\$@"' "\$host" "\$*"
EOF
chmod +x "$work/agent"
for h in "${names[@]}"; do echo "$h slots=$procs"; done >"$work/hostfile"
cat >"$work/link" <<EOF
#!/bin/sh
exec ip netns exec "$pre-${pre}h\$1" ip link set eth0 "\$2"
EOF
chmod +x "$work/link"

export GONOX_CLUSTER_HOSTS="${names[*]}" GONOX_CLUSTER_LINK="$work/link"
export GONOX_CLUSTER_MPIRUN="mpirun --hostfile $work/hostfile -np $((hosts * procs)) --map-by slot"
# The caller's Open MPI settings (ci.sh's loopback-only ones) do not
# apply. Ours: the agent, no tree spawn, TCP on the bridge's subnet only,
# shared memory within a host (mpirun --mca overrides them).
for v in $(env | grep -o '^OMPI_MCA_[A-Za-z0-9_]*'); do unset "$v"; done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_plm_rsh_agent=$work/agent OMPI_MCA_plm_rsh_no_tree_spawn=1
# The simulated hosts share this machine's cores: processes waiting in
# MPI yield them (as mpirun --oversubscribe does), or a busy-polling one
# can starve the process it waits for.
export OMPI_MCA_mpi_yield_when_idle=1
# Open MPI's TCP progress thread (btl_tcp_progress_thread, which moves
# data when the sockets wake it) is left as Open MPI sets it (off): the DP
# step on 2 hosts x 1 process is faster with it (bench_hosts.sh turns it
# on), but with it a CI job on 2 hosts x 2 processes once failed to connect
# (connect() EAGAIN, then a hang until GONOX_TIMEOUT), the wire-up race
# Open MPI's issue 3035 describes. Export OMPI_MCA_btl_tcp_progress_thread=1
# before cluster.sh to turn it on.
# A host cut off (GONOX_CLUSTER_LINK) is noticed in seconds, not the
# default quarter of an hour: Open MPI's daemons send keepalives after 2 s
# of silence, and TCP in the namespaces gives up after 4 retransmissions
# (about 6 s; net.ipv4.tcp_retries2, per namespace).
export OMPI_MCA_oob_tcp_keepalive_time=2 OMPI_MCA_oob_tcp_keepalive_intvl=1 OMPI_MCA_oob_tcp_keepalive_probes=3
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=$subnet.0/24 OMPI_MCA_oob_tcp_if_include=$subnet.0/24
echo "cluster.sh: ${hosts} hosts (${names[*]}) x ${procs} processes on $subnet.0/24${rate:+, rate $rate}${delay:+, delay $delay}${loss:+, loss $loss%}${shared:+, $shared shared at $work/shared}" >&2
set +e
if ((launch)); then
	set -- sh -c 'exec $GONOX_CLUSTER_MPIRUN "$@"' sh "$@"
fi
ip netns exec "$pre-${pre}head" unshare --uts --mount sh -c "${mountshared}"'hostname "$0"; exec "$@"' "${pre}head" "$@"
status=$?
exit $status
