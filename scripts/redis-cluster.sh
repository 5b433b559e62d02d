#!/usr/bin/env bash
# Runs a three-master Redis Cluster on loopback, for the credential-stuffing
# simulator's benchmarks (docs/BENCHMARKS.md).
#
#   scripts/redis-cluster.sh start   start 3 nodes on 127.0.0.1 with data under .data/redis-cluster/
#   scripts/redis-cluster.sh stop    stop the nodes this script started
#   scripts/redis-cluster.sh addrs   print the seed addresses, comma-separated
#
# REDIS_CLUSTER_PORT (default 7000) is the first client port; the nodes use it and the next
# two, and each also listens on its port + 10000 for the cluster bus. Starting twice starts
# nothing twice. Nothing here is persisted: the nodes keep no RDB or AOF files.
set -euo pipefail

repo_root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
readonly repo_root
readonly dir="$repo_root/.data/redis-cluster"
readonly first_port=${REDIS_CLUSTER_PORT:-7000}
readonly masters=3

die() {
	printf 'redis-cluster.sh: %s\n' "$*" >&2
	exit 1
}

[[ $first_port =~ ^[0-9]{1,5}$ ]] && ((first_port >= 1024 && first_port + masters - 1 + 10000 <= 65535)) ||
	die "REDIS_CLUSTER_PORT=$first_port: want a port from 1024 that leaves room for 3 nodes and their bus ports"

ports() {
	local i
	for ((i = 0; i < masters; i++)); do
		printf '%d\n' $((first_port + i))
	done
}

addrs() {
	local out=() p
	for p in $(ports); do
		out+=("127.0.0.1:$p")
	done
	(
		IFS=,
		printf '%s\n' "${out[*]}"
	)
}

# is_node succeeds when pid is a live Redis server: a pid file outlives its process, and the
# system may have given the pid to any other since.
is_node() {
	local pid=$1 name
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
	if command -v ps >/dev/null 2>&1; then
		name=$(ps -o comm= -p "$pid" 2>/dev/null) || return 1
	else
		name=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
	fi
	[[ $name == redis-server* ]]
}

answers() { redis-cli -h 127.0.0.1 -p "$1" ping >/dev/null 2>&1; }

start() {
	command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
		die "redis-server and redis-cli are needed (Debian: apt-get install redis-server)"
	mkdir -p "$dir"
	local p started=0
	for p in $(ports); do
		if answers "$p"; then
			continue
		fi
		redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes \
			--cluster-config-file "nodes-$p.conf" --cluster-node-timeout 5000 \
			--appendonly no --save '' --dir "$dir" --logfile "$dir/$p.log" \
			--pidfile "$dir/$p.pid" --daemonize yes
		started=1
	done
	for p in $(ports); do
		for _ in $(seq 50); do
			answers "$p" && break
			sleep 0.1
		done
		answers "$p" || die "node on port $p did not start; see $dir/$p.log"
	done
	if ! redis-cli -p "$first_port" cluster info | grep -q '^cluster_state:ok'; then
		# shellcheck disable=SC2046 # one address per word
		redis-cli --cluster create $(addrs | tr , ' ') --cluster-replicas 0 --cluster-yes >"$dir/create.log" ||
			die "creating the cluster failed; see $dir/create.log"
		for _ in $(seq 100); do
			redis-cli -p "$first_port" cluster info | grep -q '^cluster_state:ok' && break
			sleep 0.1
		done
	fi
	redis-cli -p "$first_port" cluster info | grep -q '^cluster_state:ok' || die "cluster not ready"
	((started)) && printf 'Redis Cluster started at %s\n' "$(addrs)" || printf 'Redis Cluster already running at %s\n' "$(addrs)"
}

stop() {
	local p pid
	for p in $(ports); do
		[[ -f $dir/$p.pid ]] || continue
		pid=$(<"$dir/$p.pid")
		if is_node "$pid"; then
			kill "$pid"
			for _ in $(seq 50); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.1
			done
		fi
		rm -f "$dir/$p.pid" "$dir/nodes-$p.conf"
	done
	printf 'Redis Cluster stopped\n'
}

case ${1:-start} in
start) start ;;
stop) stop ;;
addrs) addrs ;;
*) die "usage: scripts/redis-cluster.sh start|stop|addrs" ;;
esac
