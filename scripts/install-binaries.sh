#!/usr/bin/env bash
# Installs Debian packages for their binaries alone, as root: the tests run
# their own instances, so no service the packages bring is started.
#
#   scripts/install-binaries.sh PACKAGE...
#
# scripts/proxies.sh and scripts/promtool.sh call it for what is missing.
set -euo pipefail

printf 'scripts/install-binaries.sh: installing %s from Debian\n' "$*"
export DEBIAN_FRONTEND=noninteractive
# The packages would start their services (nginx and Caddy on ports 80 and
# 2019, Prometheus on 9090, the port XCloak's metrics use by default): a
# policy that forbids starting services is put in place for the install,
# unless the machine has one of its own.
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod +x /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
if ! apt-get install -y --no-install-recommends "$@"; then
	# A fresh machine has no package lists yet.
	apt-get update
	apt-get install -y --no-install-recommends "$@"
fi
