# Tests of the benchmark suite itself, included from bench/server/CMakeLists.txt.
# They run in CI: quick (a few seconds together), no peer allocator needed
# (fake programs and fake libraries); the chart test skips (ctest SKIP) when
# matplotlib is missing. The benchmarks themselves are never run by ctest.
if(EXISTS /usr/bin/python3)
  set(SPRY_SELFTEST_PYTHON /usr/bin/python3)   # the runner's interpreter
else()
  find_program(SPRY_SELFTEST_PYTHON python3)
endif()

if(NOT SPRY_SELFTEST_PYTHON)
  message(STATUS "bench: no python3, the benchmark suite's self-tests are not registered")
  return()
endif()

set(SPRY_SELFTEST ${CMAKE_CURRENT_LIST_DIR}/selftest.py)
foreach(case missing_allocator corrupt mismatch missing_program plan churn_grid aggregate failures
    report_charts)
  add_test(NAME bench_selftest_${case}
    COMMAND ${SPRY_SELFTEST_PYTHON} ${SPRY_SELFTEST} ${case})
  set_tests_properties(bench_selftest_${case} PROPERTIES
    TIMEOUT 120 LABELS "bench;selftest" SKIP_RETURN_CODE 77)
endforeach()

if(TARGET webserver)
  foreach(case server server_sigterm)
    add_test(NAME bench_selftest_${case}
      COMMAND ${SPRY_SELFTEST_PYTHON} ${SPRY_SELFTEST} ${case} $<TARGET_FILE:webserver>)
    set_tests_properties(bench_selftest_${case} PROPERTIES
      TIMEOUT 60 LABELS "bench;selftest")
  endforeach()
endif()
