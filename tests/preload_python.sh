#!/usr/bin/env bash
# preload_python.sh LIBSPRY PROBE: Debian's python3 runs a few modules of its
# own test suite under LD_PRELOAD=libspry.so; all must pass.
source "$(dirname "$0")/preload_lib.sh" "$1" "$2"
PY=/usr/bin/python3
MODULES="test_json test_re test_collections test_dict test_list test_heapq test_bisect test_unicode test_pickle"
[ -x $PY ] || fail "no $PY"
if ! $PY -c 'import test.test_json' 2>/dev/null; then
    fail "python's own test suite is not installed: install the Debian package libpython3.11-testsuite (or libpython3-testsuite)"
fi
cd "$WORK"
out=$WORK/python.out
rc=0
run_preloaded $PY -m test --timeout 600 $MODULES >"$out" 2>&1 || rc=$?
tail -25 "$out"
[ $rc -eq 0 ] || fail "python3 -m test exited with status $rc under spry"
grep -q "Tests result: SUCCESS" "$out" || fail "python3 -m test did not report SUCCESS"
expect_served 'python3(\.[0-9]+)?'
