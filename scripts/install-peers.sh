#!/usr/bin/env bash
# Installs what the benchmark suite (bench/run.py) compares spry with and
# drives it with: Debian's jemalloc, tcmalloc (minimal), mimalloc, wrk for the
# server test, matplotlib for the charts, zlib headers for the server.
#
# Idempotent (installed packages are skipped), quiet, works as root without
# sudo. A package that cannot be installed is reported and skipped: the
# runner then skips that peer with a line saying so. Never fails the build.
set -uo pipefail
pkgs=(libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 wrk python3-matplotlib zlib1g-dev)

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

missing=()
for p in "${pkgs[@]}"; do
  installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-peers: all present (${pkgs[*]})"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "install-peers: not root and no sudo; cannot install: ${missing[*]}" >&2
    echo "install-peers: the benchmark will skip what is missing" >&2
    exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
echo "install-peers: installing ${missing[*]}"
$SUDO apt-get update -qq >/dev/null 2>&1 || echo "install-peers: apt-get update failed (offline?)" >&2

# All at once first (fast); on failure one by one so that one bad package does
# not keep the others out.
if ! $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
  for p in "${missing[@]}"; do
    $SUDO apt-get install -y -qq --no-install-recommends "$p" >/dev/null 2>&1 || true
  done
fi

failed=()
for p in "${missing[@]}"; do
  installed "$p" || failed+=("$p")
done
if [ ${#failed[@]} -ne 0 ]; then
  echo "install-peers: could NOT install: ${failed[*]} (the benchmark skips what is missing)" >&2
else
  echo "install-peers: done"
fi
exit 0
