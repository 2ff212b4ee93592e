# cmake -DCOMMAND="prog;args" -DEXPECT=regex [-DSTATUS=n] [-DONCE=regex]
#       [-DREJECT=regex] -P expect_refusal.cmake
# Passes when the command exits non-zero (an error status or a signal), with
# status STATUS when given, and its output matches EXPECT: a job that must
# refuse to start, with a message naming the culprit. With ONCE, the output
# must match ONCE exactly once: a refusal every process of a job meets is
# printed by one of them, not by each. With REJECT, it must not match REJECT.
# rdmx_add_refusal_test (tests/CMakeLists.txt) runs it.
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 80)
message("${out}")
if(rc STREQUAL "0")
  message(FATAL_ERROR "the command succeeded; it should have refused to start")
endif()
if(DEFINED STATUS AND NOT rc STREQUAL "${STATUS}")
  message(FATAL_ERROR "exit status ${rc}; it should have been ${STATUS}")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "exit status ${rc}, but the output does not match '${EXPECT}'")
endif()
if(DEFINED REJECT AND out MATCHES "${REJECT}")
  message(FATAL_ERROR "the output matches '${REJECT}', which it should not")
endif()
if(DEFINED ONCE)
  set(rest "${out}")
  set(times 0)
  while(rest MATCHES "${ONCE}" AND NOT CMAKE_MATCH_0 STREQUAL "")
    math(EXPR times "${times} + 1")
    string(FIND "${rest}" "${CMAKE_MATCH_0}" at)
    string(LENGTH "${CMAKE_MATCH_0}" length)
    math(EXPR after "${at} + ${length}")
    string(SUBSTRING "${rest}" ${after} -1 rest)
  endwhile()
  if(NOT times EQUAL 1)
    message(FATAL_ERROR "'${ONCE}' was printed ${times} times; it should have been once")
  endif()
endif()
message("refused as expected (exit status ${rc})")
