#!/usr/bin/env bash
# A real PostgreSQL server for the tests and `ragstack bench scale` (ragstack/bench/postgres.py starts
# a throwaway one).
# Idempotent: installs the distribution's `postgresql` package only when no initdb is found under
# /usr/lib/postgresql/*/bin, and only as root with apt-get. It never fails the build: when it cannot
# install, it says so loudly and the PostgreSQL tests skip with the same message.
set -uo pipefail

found() {
  compgen -G '/usr/lib/postgresql/*/bin/initdb' | sort -V | tail -n 1
}

warn() {
  echo "" >&2
  echo "!!! WARNING: $* " >&2
  echo "!!! The PostgreSQL cases of tests/e2e/test_sql_fence.py will be SKIPPED." >&2
  echo "" >&2
}

initdb="$(found)"
if [[ -n "$initdb" ]]; then
  echo "postgresql: found $initdb ($("$initdb" --version 2>/dev/null || echo 'version unknown'))"
  exit 0
fi

# shellcheck source=scripts/apt.sh
source "$(dirname "$0")/apt.sh"
apt_ready postgresql || exit 0
echo "postgresql: not found, installing the distribution's package"
apt_install postgresql

initdb="$(found)"
if [[ -n "$initdb" ]]; then
  echo "postgresql: installed $initdb"
else
  warn "could not install PostgreSQL with apt-get (see the output above)."
fi
exit 0
