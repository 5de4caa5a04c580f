#!/bin/sh
# Options are ignored in setuid/setgid programs, as glibc ignores MALLOC_*
# there: the environment belongs to a less trusted user. Runs the probe as
# itself (the option is taken) and as a setuid copy owned by another user
# (the kernel sets AT_SECURE; the option must be ignored). Skips (77) where
# a setuid copy cannot be made or does not get AT_SECURE (not root, nosuid
# mount).
set -eu
probe="$1"
out=$(SPRY_PURGE_DELAY_MS=1234 "$probe")
[ "$out" = "secure=0 delay=1234" ] || { echo "plain run: $out"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "not root: cannot make a setuid copy"; exit 77; }
dir=$(mktemp -d "$(dirname "$probe")/secure.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cp "$probe" "$dir/probe"
chown 65534 "$dir/probe"
chmod 4755 "$dir/probe"
chmod 755 "$dir"
out=$(SPRY_PURGE_DELAY_MS=1234 "$dir/probe")
case "$out" in
  "secure=1 delay=250") echo "setuid: option ignored ($out)" ;;
  secure=0*) echo "no AT_SECURE for the setuid copy (nosuid mount?): $out"; exit 77 ;;
  *) echo "setuid run took the option: $out"; exit 1 ;;
esac
