#!/usr/bin/env bash
# Builds the Pascal benchmarks three times each: with the RTL heap (fpc-rtl),
# with the cmem unit (glibc's malloc behind cmem's size prefix), and with the
# spry unit (linked with BUILD/libspry.a).
#   bench/pascal/build.sh BUILD_DIR      -> BUILD_DIR/bench/pascal/<program>_<allocator>
# Exit 77 when fpc is missing.
set -eu
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
command -v fpc >/dev/null 2>&1 || { echo "fpc not found (apt-get install fp-compiler)"; exit 77; }
[ -f "$build/libspry.a" ] || { echo "$build/libspry.a not built"; exit 1; }
out=$build/bench/pascal
mkdir -p "$out"
# calls.pas (spry build) links the same loops written in C
${CC:-cc} -O2 -c -o "$out/calls_c.o" "$here/calls_c.c"
for alloc in fpc-rtl cmem spry; do
  case $alloc in
    fpc-rtl) def= ;;
    cmem) def=-dUSE_CMEM ;;
    spry) def=-dUSE_SPRY ;;
  esac
  units=$out/units-$alloc
  mkdir -p "$units"
  for prog in shrink objects strbuild churn calls; do
    if ! fpc -O2 $def -Fu"$repo/pascal" -Fl"$build" -Fi"$here" -Fo"$out" -FU"$units" \
        -o"$out/${prog}_$alloc" "$here/$prog.pas" >"$units/$prog.log" 2>&1; then
      cat "$units/$prog.log"; echo "build.sh: fpc failed on $prog ($alloc)"; exit 1
    fi
  done
done
echo "build.sh: Pascal benchmarks in $out"
