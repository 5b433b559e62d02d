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
exec "$(dirname -- "${BASH_SOURCE[0]}")/install-binaries.sh" prometheus
