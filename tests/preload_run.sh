#!/usr/bin/env bash
# preload_run.sh LIBSPRY PROBE EXE_PATTERN CMD...: runs CMD with libspry.so
# preloaded, requires exit 0, and requires that a process matching
# EXE_PATTERN was served by spry.
source "$(dirname "$0")/preload_lib.sh" "$1" "$2"
pattern=$3
shift 3
run_preloaded "$@" || fail "'$*' exited with status $? under LD_PRELOAD=libspry.so"
expect_served "$pattern"
