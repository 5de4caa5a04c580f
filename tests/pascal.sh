#!/usr/bin/env bash
# The Pascal unit's tests (pascal/tests/*.pas): builds one program with fpc
# against the freshly built libspry and runs it.
#   pascal.sh FPC SRC_DIR BUILD_DIR TEST
# FPC empty or missing: exit 77 (ctest: skipped).
set -u
fpc=$1 src=$2 build=$3 test=$4
if [ -z "$fpc" ] || ! command -v "$fpc" >/dev/null 2>&1; then
  echo "fpc not found: Pascal tests skipped (apt-get install fp-compiler)"; exit 77
fi
out=$build/pascal-tests/$test
rm -rf "$out"; mkdir -p "$out"
compile() {   # compile SOURCE EXTRA_OPTIONS...
  local s=$1; shift
  "$fpc" -O2 -Fu"$src/pascal" -Fi"$src/pascal/tests" -Fl"$build" -FU"$out" -FE"$out" "$@" \
    "$src/pascal/tests/$s.pas" >"$out/fpc.log" 2>&1 || { cat "$out/fpc.log"; echo "FAIL: fpc $s"; exit 1; }
}
no_libspry_so() {   # the static way: no libspry.so needed at run time
  if readelf -d "$1" | grep -q 'NEEDED.*libspry'; then
    readelf -d "$1" | grep NEEDED; echo "FAIL: $1 needs libspry.so"; exit 1
  fi
}
case $test in
  api)
    compile test_api; no_libspry_so "$out/test_api"
    SPRY_ABORT_ON_ERROR=1 "$out/test_api" ;;
  shared)
    # the other way: -dSPRY_SHARED links libspry.so
    compile test_api -dSPRY_SHARED
    readelf -d "$out/test_api" | grep -q 'NEEDED.*libspry\.so' || { echo "FAIL: not linked with libspry.so"; exit 1; }
    LD_LIBRARY_PATH=$build SPRY_ABORT_ON_ERROR=1 "$out/test_api" ;;
  threads)
    compile test_threads; no_libspry_so "$out/test_threads"
    SPRY_ABORT_ON_ERROR=1 "$out/test_threads" ;;
  order)
    compile test_order
    SPRY_ABORT_ON_ERROR=1 "$out/test_order" ;;
  heaptrc)
    compile test_heaptrc -gh
    log=$out/heaptrc.log
    HEAPTRC="log=$log" "$out/test_heaptrc" 2>"$out/stderr" || { cat "$out/stderr"; exit 1; }
    cat "$out/stderr" "$log"
    grep -q 'spry leaves it in place' "$out/stderr" || { echo "FAIL: no note from spry"; exit 1; }
    grep -q '^1 unfreed memory blocks : 123' "$log" || { echo "FAIL: heaptrc did not report the block"; exit 1; } ;;
  debug)
    # -dSPRY_DEBUG links the cautious build (built only where libunwind and
    # libdw are installed)
    [ -e "$build/libspry-debug.so" ] || { echo "no libspry-debug.so: skipped"; exit 77; }
    compile test_debug -dSPRY_DEBUG -g
    readelf -d "$out/test_debug" | grep -q 'NEEDED.*libspry-debug\.so' || { echo "FAIL: not linked with libspry-debug.so"; exit 1; }
    log=$out/debug.log
    LD_LIBRARY_PATH=$build SPRY_DEBUG_LOG=$log "$out/test_debug" || { echo "FAIL: exit status $?"; exit 1; }
    cat "$log"
    grep -q 'overrun: block of 24 bytes' "$log" || { echo "FAIL: overrun not reported"; exit 1; }
    grep -q 'LEAK: 1 block, 40 bytes' "$log" || { echo "FAIL: leak not reported"; exit 1; }
    # the allocation's stack: libunwind stops at the unit's GetMem (it finds
    # no .eh_frame unwind information for the program's own procedures)
    grep -q 'SPRYGETMEM.*spry.pas:[0-9]' "$log" || { echo "FAIL: no allocation stack"; exit 1; } ;;
  *) echo "unknown test $test"; exit 2 ;;
esac
