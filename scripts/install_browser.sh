#!/usr/bin/env bash
# A real browser for the web UI's tests (tests/e2e/test_web_ui.py drives it with Playwright through
# executable_path: Playwright's own browser builds are never downloaded).
# Idempotent: installs Debian's `chromium` package only when /usr/bin/chromium is missing, and only
# as root with apt-get. It never fails the build: when it cannot install, it says so loudly and the
# browser tests skip with the same message.
set -uo pipefail

BROWSER=/usr/bin/chromium

warn() {
  echo "" >&2
  echo "!!! WARNING: $* " >&2
  echo "!!! The web UI's browser tests (tests/e2e/test_web_ui.py) will be SKIPPED." >&2
  echo "" >&2
}

if [[ -x "$BROWSER" ]]; then
  echo "chromium: found $BROWSER ($("$BROWSER" --version 2>/dev/null || echo 'version unknown'))"
  exit 0
fi

# shellcheck source=scripts/apt.sh
source "$(dirname "$0")/apt.sh"
apt_ready chromium || exit 0
echo "chromium: not found, installing the distribution's package"
apt_install chromium fonts-liberation

if [[ -x "$BROWSER" ]]; then
  echo "chromium: installed $BROWSER ($("$BROWSER" --version 2>/dev/null || echo 'version unknown'))"
else
  warn "could not install chromium with apt-get (see the output above)."
fi
exit 0
