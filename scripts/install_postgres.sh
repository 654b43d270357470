#!/usr/bin/env bash
# A real PostgreSQL server for the SQL-fence tests (tests/tools/postgres.py starts a throwaway one).
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

if ! command -v apt-get >/dev/null 2>&1; then
  warn "no PostgreSQL under /usr/lib/postgresql/*/bin and no apt-get to install it."
  exit 0
fi
if [[ "$(id -u)" != "0" ]]; then
  warn "no PostgreSQL under /usr/lib/postgresql/*/bin and not root: run 'apt-get install postgresql' as root."
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
echo "postgresql: not found, installing the distribution's package"
if ! apt-get install -y -q postgresql; then
  echo "postgresql: install failed, refreshing the package lists and trying again"
  apt-get update -q && apt-get install -y -q postgresql
fi

initdb="$(found)"
if [[ -n "$initdb" ]]; then
  echo "postgresql: installed $initdb"
else
  warn "could not install PostgreSQL with apt-get (see the output above)."
fi
exit 0
