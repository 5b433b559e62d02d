#!/usr/bin/env bash
# Installs the reverse proxies that tests run in front of XCloak: nginx and
# Caddy from Debian, so that the configurations docs/DEPLOY.md and
# docs/INTEGRATION.md show are checked against the real servers, and
# HAProxy, which checks its configuration in docs/INTEGRATION.md. Only the
# binaries are used; the tests start their own instances on free loopback
# ports.
#
#   scripts/proxies.sh
#
# Without root it only says what is missing (the tests that need a proxy
# then skip); running it again does nothing once all are there.
set -euo pipefail

say() { printf 'scripts/proxies.sh: %s\n' "$*"; }
have() { command -v "$1" >/dev/null 2>&1; }

packages=()
have nginx || packages+=(nginx-light)
have caddy || packages+=(caddy)
have haproxy || packages+=(haproxy)
((${#packages[@]} == 0)) && exit 0

if [[ $(id -u) -ne 0 ]]; then
	say "missing: ${packages[*]}; the tests that run them will skip (install with: sudo apt-get install -y ${packages[*]})"
	exit 0
fi
exec "$(dirname -- "${BASH_SOURCE[0]}")/install-binaries.sh" "${packages[@]}"
