#!/usr/bin/env bash
# Prepares what the browser tests in e2e/ run on: Debian's Chromium, the
# Playwright driver pinned in e2e/package.json, and e2e/driver/, the folder
# playwright-go is pointed at. Nothing is fetched from Playwright's own
# servers: the browser comes from Debian, the driver from the npm registry.
#
#   e2e/setup.sh
#
# Running it again is quick: each step only acts when its result is missing
# or out of date.
set -euo pipefail

# driver_version must match the driver the playwright-go version in go.mod
# expects; playwright-go refuses any other.
readonly driver_version='1.52.0'
readonly chromium='/usr/bin/chromium'

e2e_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
readonly e2e_dir

say() { printf 'e2e/setup.sh: %s\n' "$*"; }
die() {
	printf 'e2e/setup.sh: %s\n' "$*" >&2
	exit 1
}
have() { command -v "$1" >/dev/null 2>&1; }
installed() { [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == 'install ok installed' ]]; }

# apt_install installs Debian packages when this script runs as root, and
# otherwise says what to run.
apt_install() {
	if [[ $(id -u) -ne 0 ]]; then
		die "missing Debian packages: $*; install them with: sudo apt-get install -y $*"
	fi
	say "installing $* from Debian"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends "$@"; then
		# A fresh machine has no package lists yet.
		apt-get update
		apt-get install -y --no-install-recommends "$@"
	fi
}

# The browser, and fonts so that pages render with real glyphs.
packages=()
[[ -x $chromium ]] || packages+=(chromium)
installed fonts-liberation || packages+=(fonts-liberation)
if ((${#packages[@]} > 0)); then
	apt_install "${packages[@]}"
fi
[[ -x $chromium ]] || die "$chromium is still missing after installing chromium"

# Node runs the driver; npm installs it.
if ! have node || ! have npm; then
	apt_install nodejs npm
fi

# The driver package. npm ci writes node_modules/.package-lock.json; a
# package-lock.json newer than it means the pinned packages changed.
installed_lock="$e2e_dir/node_modules/.package-lock.json"
if [[ ! -f $installed_lock || $e2e_dir/package-lock.json -nt $installed_lock ||
	! -f $e2e_dir/node_modules/playwright-core/cli.js ]]; then
	say "installing the Playwright driver with npm ci"
	npm ci --prefix "$e2e_dir" --no-audit --no-fund
fi

# The folder layout playwright-go expects: <dir>/node and <dir>/package/cli.js.
mkdir -p "$e2e_dir/driver"
ln -sfn "$(command -v node)" "$e2e_dir/driver/node"
ln -sfn ../node_modules/playwright-core "$e2e_dir/driver/package"

got=$("$e2e_dir/driver/node" "$e2e_dir/driver/package/cli.js" --version)
if [[ $got != "Version $driver_version" ]]; then
	die "driver reports \"$got\", want \"Version $driver_version\"; check e2e/package.json and package-lock.json"
fi
say "ready: driver $driver_version, browser $chromium"
