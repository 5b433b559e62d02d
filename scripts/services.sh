#!/usr/bin/env bash
# Makes sure the Redis and Postgres that XCloak needs are reachable.
#
#   scripts/services.sh [start]   reuse running servers, or start local ones with data under .data/
#   scripts/services.sh stop      stop only the servers this script started from .data/
#
# Reads XCLOAK_REDIS_URL (default redis://127.0.0.1:6379/0) and XCLOAK_DATABASE_URL
# (default postgres://postgres@127.0.0.1:5432/xcloak?sslmode=disable). A server is started
# only when its URL names a loopback host and nothing answers there, so running this twice
# starts nothing twice. The database named in the URL is created by `xcloak serve` and
# `xcloak migrate`, not here.
set -euo pipefail

readonly default_redis_url='redis://127.0.0.1:6379/0'
readonly default_database_url='postgres://postgres@127.0.0.1:5432/xcloak?sslmode=disable'

repo_root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
readonly repo_root
readonly data_dir="$repo_root/.data"
readonly redis_dir="$data_dir/redis"

say() { printf '%s\n' "$*"; }
die() {
	printf 'services.sh: %s\n' "$*" >&2
	exit 1
}
have() { command -v "$1" >/dev/null 2>&1; }

# show prints a path relative to the repository when it lies inside it, as messages read better.
show() {
	case $1 in
	"$repo_root"/*) printf '%s' "${1#"$repo_root"/}" ;;
	*) printf '%s' "$1" ;;
	esac
}

# redact replaces the password in a URL's userinfo so that no message ever shows it. A value
# that is no URL, such as a keyword/value connection string (password=...), is not shown at all:
# where its password ends is not a thing to guess at.
redact() {
	local url=$1 scheme rest authority userinfo
	if [[ $url != *://* ]]; then
		printf '(not shown, as it is no URL)'
		return
	fi
	scheme=${url%%://*}
	rest=${url#*://}
	authority=${rest%%[/?#]*}
	if [[ $authority == *@* ]]; then
		userinfo=${authority%@*}
		if [[ $userinfo == *:* ]]; then
			printf '%s://%s:xxxxx@%s' "$scheme" "${userinfo%%:*}" "${rest#"$userinfo"@}"
			return
		fi
	fi
	printf '%s' "$url"
}

# parse_host_port sets url_host and url_port from scheme://[user[:password]@]host[:port][/path][?query].
# The authority ends at the first / ? or #; userinfo ends at its last @ (as in Go's net/url).
parse_host_port() {
	local name=$1 url=$2 default_port=$3 authority hostport
	[[ $url == *://* ]] || die "$name is not a URL: $(redact "$url")"
	authority=${url#*://}
	authority=${authority%%[/?#]*}
	hostport=${authority##*@}
	if [[ $hostport == \[* ]]; then
		url_host=${hostport#\[}
		url_host=${url_host%%]*}
		hostport=${hostport#*]}
		url_port=${hostport#:}
	elif [[ $hostport == *:* ]]; then
		url_host=${hostport%%:*}
		url_port=${hostport#*:}
	else
		url_host=$hostport
		url_port=
	fi
	[[ $url_host != *,* ]] || die "$name names several hosts; this script handles one: $(redact "$url")"
	[[ -n $url_port ]] || url_port=$default_port
	if [[ ! $url_port =~ ^[0-9]{1,5}$ ]] || ((10#$url_port < 1 || 10#$url_port > 65535)); then
		die "$name has an invalid port \"$url_port\": $(redact "$url")"
	fi
	url_port=$((10#$url_port))
}

is_loopback() {
	case $1 in
	localhost | 127.* | ::1 | 0:0:0:0:0:0:0:1) return 0 ;;
	*) return 1 ;;
	esac
}

# bind_address is the address a local server listens on for a loopback host.
bind_address() {
	case $1 in
	localhost) printf '127.0.0.1' ;;
	0:0:0:0:0:0:0:1) printf '::1' ;;
	*) printf '%s' "$1" ;;
	esac
}

# tcp_open succeeds when something accepts a TCP connection on host:port within two seconds.
tcp_open() {
	local host=$1 port=$2
	if have timeout; then
		timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$host" "$port" 2>/dev/null
	else
		bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$host" "$port" 2>/dev/null
	fi
}

# wait_for runs a check up to tries times, 0.2 s apart, until it succeeds.
wait_for() {
	local tries=$1 i
	shift
	for ((i = 0; i < tries; i++)); do
		if "$@"; then
			return 0
		fi
		sleep 0.2
	done
	return 1
}

# process_name prints the command name of a live process, or nothing.
process_name() {
	if have ps; then
		ps -o comm= -p "$1" 2>/dev/null || true
	elif [[ -r /proc/$1/comm ]]; then
		cat "/proc/$1/comm"
	fi
}

apt_updated=0
policy_rc_created=0

cleanup() {
	if ((policy_rc_created)); then
		rm -f /usr/sbin/policy-rc.d
	fi
}
trap cleanup EXIT

# apt_install installs Debian packages when running as root on a system with apt-get.
# A policy-rc.d that denies service starts keeps the package's own server from starting:
# this script starts its own under .data/ and a half-started system service would only confuse.
apt_install() {
	((EUID == 0)) && have apt-get || return 1
	if [[ ! -e /usr/sbin/policy-rc.d ]]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		policy_rc_created=1
	fi
	if ((!apt_updated)); then
		say "installing: apt-get update"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		apt_updated=1
	fi
	say "installing: apt-get install $*"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
	if ((policy_rc_created)); then
		rm -f /usr/sbin/policy-rc.d
		policy_rc_created=0
	fi
}

# ---------------------------------------------------------------------------------------------
# Redis

# redis_ready checks the port and, when redis-cli exists, that a Redis answers there.
# An authentication error still proves a ready Redis; the client brings the password.
redis_ready() {
	local host=$1 port=$2 tls=$3 reply
	tcp_open "$host" "$port" || return 1
	if [[ $tls == yes ]] || ! have redis-cli; then
		return 0
	fi
	reply=$(timeout 3 redis-cli -h "$host" -p "$port" ping 2>&1) || true
	case $reply in
	PONG | *NOAUTH* | *WRONGPASS* | *"without any password configured"*) return 0 ;;
	*) return 1 ;;
	esac
}

ensure_redis() {
	local url=${XCLOAK_REDIS_URL:-$default_redis_url} tls=no host port bind pidfile logfile pid
	case $url in
	redis://*) ;;
	rediss://*) tls=yes ;;
	*) die "XCLOAK_REDIS_URL must be a redis:// or rediss:// URL: $(redact "$url")" ;;
	esac
	parse_host_port XCLOAK_REDIS_URL "$url" 6379
	host=${url_host:-localhost}
	port=$url_port
	pidfile="$redis_dir/redis-$port.pid"
	logfile="$redis_dir/redis-$port.log"

	if redis_ready "$host" "$port" "$tls"; then
		if [[ -f $pidfile ]] && pid=$(<"$pidfile") && kill -0 "$pid" 2>/dev/null; then
			say "redis: using $(redact "$url") (already running, started earlier from $(show "$redis_dir"))"
		else
			say "redis: using $(redact "$url") (already running)"
		fi
		return
	fi
	if ! is_loopback "$host"; then
		die "redis: nothing answers at $(redact "$url") (XCLOAK_REDIS_URL); start it or point XCLOAK_REDIS_URL at a running Redis"
	fi
	if ! have redis-server; then
		apt_install redis-server ||
			die "redis: redis-server is not installed; install it (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis) or point XCLOAK_REDIS_URL at a running Redis"
		have redis-server || die "redis: redis-server still not found after installing"
		if redis_ready "$host" "$port" "$tls"; then
			say "redis: installed redis-server; using $(redact "$url") (already running)"
			return
		fi
	fi

	bind=$(bind_address "$host")
	mkdir -p "$redis_dir"
	redis-server --daemonize yes --port "$port" --bind "$bind" --dir "$redis_dir" \
		--pidfile "$pidfile" --logfile "$logfile" --save "" --appendonly no 9>&- ||
		die "redis: redis-server failed to start; see $(show "$logfile")"
	if ! wait_for 50 redis_ready "$host" "$port" "$tls"; then
		tail -n 20 "$logfile" >&2 2>/dev/null || true
		die "redis: started redis-server on $bind:$port but it does not answer; see $(show "$logfile")"
	fi
	say "redis: started local redis on $bind:$port (data in $(show "$redis_dir"))"
}

stop_redis() {
	local pidfile pid port stopped=0
	shopt -s nullglob
	for pidfile in "$redis_dir"/redis-*.pid; do
		port=${pidfile##*/redis-}
		port=${port%.pid}
		pid=$(<"$pidfile") || continue
		if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && [[ $(process_name "$pid") == redis-server* ]]; then
			kill -TERM "$pid"
			wait_for 50 eval "! kill -0 $pid 2>/dev/null" ||
				die "redis: local redis on port $port (pid $pid) did not stop"
			say "redis: stopped local redis on port $port"
			stopped=1
		fi
		rm -f "$pidfile"
	done
	shopt -u nullglob
	((stopped)) || say "redis: nothing to stop (no running redis started from $(show "$redis_dir"))"
}

# ---------------------------------------------------------------------------------------------
# Postgres

pg_bin=

# find_pg_bin sets pg_bin to the directory holding initdb and pg_ctl, preferring the given
# major version (that of an existing data directory), else the newest installed.
find_pg_bin() {
	local want=${1:-} dir
	pg_bin=
	if [[ -n $want ]]; then
		if [[ -x /usr/lib/postgresql/$want/bin/pg_ctl ]]; then
			pg_bin=/usr/lib/postgresql/$want/bin
		elif have pg_ctl && [[ $(pg_ctl --version) =~ \ ${want}[.\ ] ]]; then
			pg_bin=$(dirname -- "$(command -v pg_ctl)")
		fi
		return
	fi
	dir=$(printf '%s\n' /usr/lib/postgresql/*/bin/initdb 2>/dev/null | grep -v '\*' | sort -V | tail -n 1 || true)
	if [[ -n $dir ]]; then
		pg_bin=$(dirname -- "$dir")
	elif have initdb && have pg_ctl; then
		pg_bin=$(dirname -- "$(command -v initdb)")
	fi
}

# The data directory lives in .data/postgres unless the repository path cannot be traversed by
# the postgres system user (root runs the server as that user, since Postgres refuses root).
fallback_pg_data() {
	printf '/tmp/xcloak-%s-%s/postgres' "$EUID" "$(printf '%s' "$repo_root" | cksum | cut -d' ' -f1)"
}

# private_dir makes the directory dir, mode 755, or takes the one there when it is this user's
# own and no link. Under /tmp its name is known in advance: one another user made there first
# would be handed root's Postgres data, and the chown of the log in it, which a link there would
# turn on any file of the machine.
private_dir() {
	local dir=$1
	mkdir -m 755 -- "$dir" 2>/dev/null || true
	if ! is_own_dir "$dir"; then
		die "$dir is not a directory of this user's (another user, or a link, put it there); remove it and run again"
	fi
	chmod 755 -- "$dir"
}

# is_own_dir reports whether dir is a directory, not a link, that this user owns.
is_own_dir() {
	[[ ! -L $1 && -d $1 && -O $1 ]]
}

pg_data_dir() {
	if ((EUID == 0)) && ! runuser -u postgres -- test -x "$repo_root" 2>/dev/null; then
		fallback_pg_data
	else
		printf '%s' "$data_dir/postgres"
	fi
}

# as_pg runs a Postgres server command, as the postgres system user when root.
as_pg() {
	if ((EUID == 0)); then
		(cd / && runuser -u postgres -- "$@")
	else
		"$@"
	fi
}

pg_ready() {
	local host=$1 port=$2 isready
	tcp_open "$host" "$port" || return 1
	isready=$(command -v pg_isready || true)
	[[ -n $isready || -z $pg_bin ]] || isready=$pg_bin/pg_isready
	if [[ -n $isready && -x $isready ]]; then
		"$isready" -q -h "$host" -p "$port" -t 3
	fi
}

ensure_postgres() {
	local url=${XCLOAK_DATABASE_URL:-$default_database_url} host port bind pgdata log sock running_port out
	case $url in
	postgres://* | postgresql://*) ;;
	*) die "XCLOAK_DATABASE_URL must be a postgres:// URL: $(redact "$url")" ;;
	esac
	parse_host_port XCLOAK_DATABASE_URL "$url" 5432
	[[ -n $url_host ]] || die "XCLOAK_DATABASE_URL names no host; give one, e.g. postgres://127.0.0.1:5432/xcloak?sslmode=disable"
	host=$url_host
	port=$url_port
	pgdata=$(pg_data_dir)
	log="$(dirname -- "$pgdata")/postgres.log"

	if pg_ready "$host" "$port"; then
		if [[ -f $pgdata/postmaster.pid ]] && [[ $(sed -n 4p "$pgdata/postmaster.pid" 2>/dev/null) == "$port" ]]; then
			say "postgres: using $(redact "$url") (already running, started earlier from $(show "$pgdata"))"
		else
			say "postgres: using $(redact "$url") (already running)"
		fi
		return
	fi
	if ! is_loopback "$host"; then
		die "postgres: nothing answers at $(redact "$url") (XCLOAK_DATABASE_URL); start it or point XCLOAK_DATABASE_URL at a running Postgres"
	fi

	if [[ -f $pgdata/PG_VERSION ]]; then
		find_pg_bin "$(<"$pgdata/PG_VERSION")"
		[[ -n $pg_bin ]] || die "postgres: $(show "$pgdata") was made by Postgres $(<"$pgdata/PG_VERSION"), whose binaries are not installed; install them or remove $(show "$pgdata") to start afresh"
	else
		find_pg_bin
		if [[ -z $pg_bin ]]; then
			apt_install postgresql ||
				die "postgres: the Postgres server binaries (initdb, pg_ctl) are not installed; install them (Debian/Ubuntu: sudo apt-get install postgresql; macOS: brew install postgresql) or point XCLOAK_DATABASE_URL at a running Postgres"
			find_pg_bin
			[[ -n $pg_bin ]] || die "postgres: initdb still not found after installing postgresql"
			if pg_ready "$host" "$port"; then
				say "postgres: installed postgresql; using $(redact "$url") (already running)"
				return
			fi
		fi
	fi
	if ((EUID == 0)); then
		id postgres >/dev/null 2>&1 ||
			die "postgres: Postgres refuses to run as root and there is no 'postgres' system user to run it; create one (useradd --system postgres) or run this script as a normal user"
		have runuser || die "postgres: runuser is needed to run Postgres as the postgres user"
	fi

	bind=$(bind_address "$host")
	if [[ $pgdata == "$data_dir"/* ]]; then
		mkdir -p "$data_dir"
		((EUID != 0)) || chmod go+x "$data_dir"
	else
		private_dir "$(dirname -- "$pgdata")"
		say "postgres: the postgres user cannot reach $(show "$data_dir"), so the data goes to $pgdata"
	fi

	if [[ ! -f $pgdata/PG_VERSION ]]; then
		if [[ -d $pgdata ]] && [[ -n $(ls -A "$pgdata") ]]; then
			die "postgres: $(show "$pgdata") exists but holds no database cluster; remove it to start afresh"
		fi
		mkdir -p "$pgdata"
		chmod 700 "$pgdata"
		((EUID != 0)) || chown postgres: "$pgdata"
		if ! out=$(as_pg "$pg_bin/initdb" -D "$pgdata" -U postgres --auth=trust --no-locale -E UTF8 2>&1); then
			printf '%s\n' "$out" >&2
			die "postgres: initdb failed for $(show "$pgdata")"
		fi
	fi

	if as_pg "$pg_bin/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; then
		running_port=$(sed -n 4p "$pgdata/postmaster.pid" 2>/dev/null || true)
		die "postgres: the local server in $(show "$pgdata") is running on port ${running_port:-?}, not $port as XCLOAK_DATABASE_URL asks; use that port or run 'scripts/services.sh stop' first"
	fi

	# The socket goes in the data directory when its path fits a Unix socket name (107 bytes);
	# otherwise there is no socket, as the service connects over TCP.
	sock=$pgdata
	((${#pgdata} + 20 < 107)) || sock=
	[[ $sock != *"'"* ]] || sock=
	touch "$log"
	((EUID != 0)) || chown postgres: "$log"
	if ! as_pg "$pg_bin/pg_ctl" -D "$pgdata" -l "$log" -w -t 60 \
		-o "-p $port -c listen_addresses=$bind -k '$sock'" start >/dev/null 9>&-; then
		tail -n 20 "$log" >&2 2>/dev/null || true
		die "postgres: pg_ctl could not start the server in $(show "$pgdata"); see $(show "$log")"
	fi
	wait_for 50 pg_ready "$host" "$port" ||
		die "postgres: started the server in $(show "$pgdata") but nothing answers on $bind:$port; see $(show "$log")"
	say "postgres: started local postgres on $bind:$port (data in $(show "$pgdata"))"
}

stop_postgres() {
	local pgdata stopped=0 candidates
	candidates=("$data_dir/postgres")
	[[ $(fallback_pg_data) == "${candidates[0]}" ]] || candidates+=("$(fallback_pg_data)")
	for pgdata in "${candidates[@]}"; do
		# The name under /tmp is known in advance: a server there is ours to
		# stop only in a directory of ours, or another user's planted
		# postmaster.pid would have pg_ctl signal the process it names.
		[[ $pgdata == "${candidates[0]}" ]] || is_own_dir "$(dirname -- "$pgdata")" || continue
		[[ -f $pgdata/PG_VERSION && -f $pgdata/postmaster.pid ]] || continue
		find_pg_bin "$(<"$pgdata/PG_VERSION")"
		[[ -n $pg_bin ]] || die "postgres: cannot stop the server in $(show "$pgdata"): pg_ctl for Postgres $(<"$pgdata/PG_VERSION") not found"
		if as_pg "$pg_bin/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; then
			as_pg "$pg_bin/pg_ctl" -D "$pgdata" -m fast -w stop >/dev/null ||
				die "postgres: pg_ctl could not stop the server in $(show "$pgdata")"
			say "postgres: stopped local postgres (data in $(show "$pgdata"))"
			stopped=1
		fi
	done
	((stopped)) || say "postgres: nothing to stop (no running postgres started from $(show "$data_dir"))"
}

# ---------------------------------------------------------------------------------------------

main() {
	local cmd=${1:-start}
	case $cmd in
	start | stop) ;;
	-h | --help | help)
		say "usage: scripts/services.sh [start|stop]"
		return 0
		;;
	*)
		printf 'usage: scripts/services.sh [start|stop]\n' >&2
		exit 2
		;;
	esac

	# One run at a time, so two concurrent runs never start the same server twice. Servers
	# started here get the lock descriptor closed (9>&-), or they would hold the lock forever.
	mkdir -p "$data_dir"
	if have flock; then
		exec 9>"$data_dir/.services.lock"
		flock 9
	fi

	if [[ $cmd == stop ]]; then
		stop_redis
		stop_postgres
	else
		ensure_redis
		ensure_postgres
	fi
}

# Sourced (by a test), it only defines the functions.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	main "$@"
fi
