# cmake -DBUILD_DIR=... -DTARGET=... -DEXPECTED=... -P expect_error.cmake
# Passes when building TARGET fails and its first compiler error contains EXPECTED.
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGET}
                OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
if(rc EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled; it must not")
endif()
string(REGEX MATCH "error:[^\n]*" first "${out}")
string(FIND "${first}" "${EXPECTED}" at)
if(first STREQUAL "" OR at EQUAL -1)
  message(FATAL_ERROR "the first error is not \"${EXPECTED}\":\n${out}")
endif()
message(STATUS "failed as expected: ${first}")
