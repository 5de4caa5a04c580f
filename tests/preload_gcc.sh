#!/usr/bin/env bash
# preload_gcc.sh LIBSPRY PROBE CC INCLUDE_DIR CHECK_PROGRAM -- CFLAGS... -- SOURCES...
# (CFLAGS: the -std option and spry's SPRY_CFLAGS)
# The compiler builds spry itself under LD_PRELOAD=libspry.so (every cc1, as
# and ld served by spry; with clang, its own processes and ld); the library
# it builds must then work: CHECK_PROGRAM
# (stl_heavy) runs with the self-built library preloaded and checks that it
# is served by it.
source "$(dirname "$0")/preload_lib.sh" "$1" "$2"
CC=$3
INC=$4
CHECK_PROGRAM=$5
shift 5
[ "$1" = -- ] || fail "usage"
shift
cflags=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do cflags+=("$1"); shift; done
shift
[ $# -gt 0 ] || fail "no sources given"
objs=()
for src in "$@"; do
    obj=$WORK/$(basename "$src" .c).o
    run_preloaded "$CC" -O2 -fPIC "${cflags[@]}" -I"$INC" -c "$src" -o "$obj" ||
        fail "compiling $src under spry failed"
    objs+=("$obj")
done
run_preloaded "$CC" -shared -o "$WORK/libspry-selfbuilt.so" "${objs[@]}" -lpthread ||
    fail "linking libspry under spry failed"
if "$CC" --version 2>/dev/null | grep -q clang; then
    # clang compiles in a clang process (-cc1) and assembles in it too
    expect_served '/clang[^/]*'
else
    expect_served '/cc1'
    expect_served '(/|-)as'
fi
expect_served '(/|-)ld(\.bfd)?'
echo "compiled ${#objs[@]} files under spry"
LD_PRELOAD="$WORK/libspry-selfbuilt.so" "$CHECK_PROGRAM" --expect-spry ||
    fail "the self-built libspry does not work: $CHECK_PROGRAM failed under it"
