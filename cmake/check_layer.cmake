# Checks that one layer's files include only what its layer may use:
# public headers of the layers it depends on (rdmx/<layer>/...) and its own
# private headers; never another layer's private headers (src/<layer>/).
# Run by every build (src/CMakeLists.txt) before the layer compiles, so an
# upward or sideways include fails the build with the file and line.
#   cmake -DRULES=rules.cmake [-DSTAMP=file] -P check_layer.cmake
# where rules.cmake sets LAYER, ALLOWED (the layers it uses) and FILES.
cmake_minimum_required(VERSION 3.20)
include("${RULES}")
set(errors "")
foreach(file IN LISTS FILES)
  file(STRINGS "${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*" "\\1" path "${line}")
    set(reached "")
    set(private FALSE)
    if(path MATCHES "^rdmx/([a-z_]+)/")
      set(reached "${CMAKE_MATCH_1}")
    elseif(path MATCHES "^\\.\\./([a-z_]+)/")
      set(reached "${CMAKE_MATCH_1}")
      set(private TRUE)
    endif()
    if(reached STREQUAL "" OR reached STREQUAL LAYER)
      continue()
    endif()
    if(private)
      string(APPEND errors "  ${file}: includes ${path}, a private header of ${reached}\n")
    elseif(NOT reached IN_LIST ALLOWED)
      string(APPEND errors "  ${file}: includes ${path}, but ${LAYER} does not use ${reached}\n")
    endif()
  endforeach()
endforeach()
if(errors)
  string(REPLACE ";" ", " allowed "${ALLOWED}")
  message(FATAL_ERROR "rdmx layering: ${LAYER} may use ${allowed} (src/CMakeLists.txt):\n${errors}")
endif()
if(STAMP)
  file(TOUCH "${STAMP}")
endif()
