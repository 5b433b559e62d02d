#!/usr/bin/env bash
# Installs promtool, which checks deploy/prometheus/alerts.yml and runs its
# unit tests, from Debian's prometheus package. Only the promtool binary is
# used; the package's Prometheus service is not started.
#
#   scripts/promtool.sh
#
# Without root it only says what is missing (the test that needs promtool
# then skips); running it again does nothing once promtool is there.
set -euo pipefail

say() { printf 'scripts/promtool.sh: %s\n' "$*"; }

command -v promtool >/dev/null 2>&1 && exit 0

if [[ $(id -u) -ne 0 ]]; then
	say "missing: promtool; the test of the alert rules will skip (install with: sudo apt-get install -y --no-install-recommends prometheus)"
	exit 0
fi
say "installing promtool (Debian package prometheus)"
export DEBIAN_FRONTEND=noninteractive
# The package would start a Prometheus on port 9090, the port XCloak's
# metrics use by default: a policy that forbids starting services is put in
# place for the install, unless the machine has one of its own.
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod +x /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
if ! apt-get install -y --no-install-recommends prometheus; then
	# A fresh machine has no package lists yet.
	apt-get update
	apt-get install -y --no-install-recommends prometheus
fi
