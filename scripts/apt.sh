# Sourced by the scripts/install_*.sh scripts: Debian packages installed as root with apt-get.
# Each script defines warn() (what it cannot do, and which tests will skip) before sourcing this.

# apt_ready PACKAGE: whether apt-get can install here; otherwise warns, naming the package.
apt_ready() {
  if ! command -v apt-get >/dev/null 2>&1; then
    warn "no $1 and no apt-get to install it."
    return 1
  fi
  if [[ "$(id -u)" != "0" ]]; then
    warn "no $1 and not root: run 'apt-get install $1' as root."
    return 1
  fi
}

# apt_install PACKAGE...: installs them, refreshing the package lists once when the first try fails.
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q --no-install-recommends "$@"; then
    echo "$1: install failed, refreshing the package lists and trying again"
    apt-get update -q && apt-get install -y -q --no-install-recommends "$@"
  fi
}
