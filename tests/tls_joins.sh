#!/usr/bin/env bash
# tls_joins.sh PROGRAM LIB: tls_joins run as usual, then through the dynamic
# loader named as the program (ld.so PROGRAM), where AT_BASE is 0.
set -eu
prog=$1
lib=$2
"$prog" "$lib"
loader=$(readelf -l "$prog" | sed -n 's/.*interpreter: \(.*\)\]/\1/p')
[ -n "$loader" ] || { echo "tls_joins.sh: no interpreter in $prog" >&2; exit 1; }
"$loader" "$prog" "$lib"
