# cmake -DCOMMAND="prog;args" -DEXPECT=regex [-DENV="NAME=VALUE"] -P expect_refusal.cmake
# Passes when the command exits non-zero (an error status or a signal) and
# its output matches EXPECT: a job that must refuse to start, with a
# message naming the culprit.
if(ENV)
  string(FIND "${ENV}" "=" eq)
  string(SUBSTRING "${ENV}" 0 ${eq} name)
  math(EXPR start "${eq} + 1")
  string(SUBSTRING "${ENV}" ${start} -1 value)
  set(ENV{${name}} "${value}")
endif()
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 50)
message("${out}")
if(rc STREQUAL "0")
  message(FATAL_ERROR "the command succeeded; it should have refused to start")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "exit status ${rc}, but the output does not match '${EXPECT}'")
endif()
message("refused as expected (exit status ${rc})")
