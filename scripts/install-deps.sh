#!/usr/bin/env bash
# Installs the Debian packages that building and testing spry need. Idempotent:
# does nothing when everything is present already.
set -euo pipefail
pkgs=(cmake make gcc g++ gcc-multilib g++-multilib pkg-config python3 python3-matplotlib sqlite3 git valgrind zlib1g-dev
  fp-compiler)   # fp-compiler: the Pascal unit's tests and benchmarks
# The cautious build (libspry-debug.so): stacks with libunwind, symbols with
# elfutils' libdw (README, "Cautious mode").
pkgs+=(libunwind-dev libdw-dev)
# `make fuzz` builds its libFuzzer target with clang (gcc stays the compiler).
pkgs+=(clang libclang-rt-dev)
# stats_file checks that a statistics record is one write(2) with strace.
pkgs+=(strace)
# The preload test runs Python's own test suite: Debian ships it apart.
pyver=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)
[ -n "$pyver" ] && pkgs+=("libpython${pyver}-testsuite")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || true
if ! $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
  # One bad name must not stop the rest: install one by one, report failures.
  failed=()
  for p in "${missing[@]}"; do
    $SUDO apt-get install -y -qq --no-install-recommends "$p" || failed+=("$p")
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "install-deps: could not install: ${failed[*]} (tests that need them will say so)" >&2
  fi
fi
# The build itself cannot do without these.
for tool in cmake make cc c++; do
  command -v "$tool" >/dev/null 2>&1 || { echo "install-deps: $tool is missing" >&2; exit 1; }
done
