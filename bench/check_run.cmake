# check_run.cmake - runs one benchmark program and checks what it did.
#   cmake -DPROG=<exe> -DARGS="<space-separated args>" -DEXPECT_RC=<code>
#         [-DEXPECT_OUT=<regex on stdout>] [-DEXPECT_ERR=<regex on stderr>]
#         -P check_run.cmake
# Fails unless the exit code is EXPECT_RC and both regexes match. A run that
# is expected to fail must also print no RESULT line: a failed run must never
# be mistaken for a measurement.
separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND ${PROG} ${args}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(ok TRUE)
if(NOT "${rc}" STREQUAL "${EXPECT_RC}")
  message("exit code ${rc}, expected ${EXPECT_RC}")
  set(ok FALSE)
endif()
if(NOT "${EXPECT_OUT}" STREQUAL "" AND NOT out MATCHES "${EXPECT_OUT}")
  message("stdout does not match '${EXPECT_OUT}'")
  set(ok FALSE)
endif()
if(NOT "${EXPECT_ERR}" STREQUAL "" AND NOT err MATCHES "${EXPECT_ERR}")
  message("stderr does not match '${EXPECT_ERR}'")
  set(ok FALSE)
endif()
if(NOT "${EXPECT_RC}" STREQUAL "0" AND out MATCHES "RESULT ")
  message("a failing run printed a RESULT line")
  set(ok FALSE)
endif()
if(NOT ok)
  message(FATAL_ERROR "FAILED: ${PROG} ${ARGS}\n--- stdout\n${out}--- stderr\n${err}")
endif()
message("ok: ${PROG} ${ARGS}\n${out}")
