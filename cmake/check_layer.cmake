# Checks what a set of files includes against the layering rules
# (cmake/layering.cmake wires it into the build):
#   - a layer's files include their own layer's headers, the public headers
#     (include/rdmx/<layer>/) of the layers it declares it uses, and system
#     headers; never another layer's private headers (src/<layer>/), never a
#     file of the tests, apps or benchmarks, and its public headers never
#     include its private ones. Every layer it declares is included somewhere:
#     the declared graph is the real one.
#   - tests, apps and benchmarks include public headers only; a white-box test
#     may include the private headers of the one layer it is declared to look
#     into, and must include one of them.
# Every #include is resolved as the compiler resolves it: a quoted name first
# beside the including file, then under include/ and src/ (the roots through
# which a layer's headers can be reached), so angle-bracket and relative
# includes are classified like the rest.
#   cmake -DRULES=rules.cmake [-DSTAMP=file] -P check_layer.cmake
# rules.cmake sets
#   ROOT       the source tree whose include/ and src/ hold the layers
#   BUILD      (may be empty) the build tree; generated files there are free
#   FILES      the files to check
#   LAYER      the layer the files make up, with USES the layers it declares,
#   or PROGRAMS  what the files are (tests, apps, benchmarks), with WHITE_BOX
#              entries test|layer|file for the sources of white-box tests
cmake_minimum_required(VERSION 3.20)
include("${RULES}")

# resolve(<out> <including file> <" or <> <name>): the path an include reaches.
# A name that reaches no file is taken as written: beside the including file
# when it starts with ./ or ../ and is quoted, else under include/.
function(resolve out file form name)
  cmake_path(GET file PARENT_PATH dir)
  set(candidates "${ROOT}/include/${name}" "${ROOT}/src/${name}")
  if(form STREQUAL "\"")
    list(PREPEND candidates "${dir}/${name}")
  endif()
  foreach(candidate IN LISTS candidates)
    cmake_path(NORMAL_PATH candidate)
    if(EXISTS "${candidate}" AND NOT IS_DIRECTORY "${candidate}")
      set(${out} "${candidate}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  if(form STREQUAL "\"" AND name MATCHES "^\\.\\.?/")
    set(candidate "${dir}/${name}")
  else()
    set(candidate "${ROOT}/include/${name}")
  endif()
  cmake_path(NORMAL_PATH candidate)
  set(${out} "${candidate}" PARENT_SCOPE)
endfunction()

# classify(<path>): sets kind (public, private, outside or system) and owner
# (the layer of a public or private header) in the caller.
#   outside: an existing file of the source tree that belongs to no layer.
#   system: anything else (the standard library, UCX, generated files).
macro(classify path)
  file(RELATIVE_PATH rel "${ROOT}" "${path}")
  set(kind system)
  set(owner "")
  set(generated FALSE)
  if(BUILD)
    file(RELATIVE_PATH in_build "${BUILD}" "${path}")
    if(NOT in_build MATCHES "^\\.\\./")
      set(generated TRUE)
    endif()
  endif()
  if(generated OR rel MATCHES "^\\.\\./" OR IS_ABSOLUTE "${rel}")
    # outside the source tree, or made by the build
  elseif(rel MATCHES "^include/rdmx/([^/]+)/")
    set(kind public)
    set(owner "${CMAKE_MATCH_1}")
  elseif(rel MATCHES "^src/([^/]+)/")
    set(kind private)
    set(owner "${CMAKE_MATCH_1}")
  elseif(EXISTS "${path}")
    set(kind outside)
  endif()
endmacro()

# line_of(<out> <file> <text>): the number of the first line holding text.
function(line_of out file text)
  file(READ "${file}" content)
  string(FIND "${content}" "${text}" at)
  if(at EQUAL -1)
    set(${out} "?" PARENT_SCOPE)
    return()
  endif()
  string(SUBSTRING "${content}" 0 ${at} before)
  string(REGEX MATCHALL "\n" breaks "${before}")
  list(LENGTH breaks count)
  math(EXPR number "${count} + 1")
  set(${out} ${number} PARENT_SCOPE)
endfunction()

set(errors "")
set(included "")    # layers whose public headers a layer's files include
set(looked_into "") # test|layer of white-box tests that include a private header
foreach(file IN LISTS FILES)
  classify("${file}")
  set(file_kind ${kind})
  set(white_box "")
  foreach(entry IN LISTS WHITE_BOX)
    if(entry MATCHES "^([^|]+)\\|([^|]+)\\|(.*)$" AND CMAKE_MATCH_3 STREQUAL file)
      list(APPEND white_box "${CMAKE_MATCH_1}|${CMAKE_MATCH_2}")
    endif()
  endforeach()
  file(STRINGS "${file}" lines ENCODING UTF-8 REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "^[ \t]*#[ \t]*include[ \t]*([<\"])([^>\"]*)[>\"]")
      continue()
    endif()
    set(form "${CMAKE_MATCH_1}")
    set(name "${CMAKE_MATCH_2}")
    if(form STREQUAL "<")
      set(written "<${name}>")
    else()
      set(written "\"${name}\"")
    endif()
    resolve(reached "${file}" "${form}" "${name}")
    classify("${reached}")
    set(problem "")
    if(NOT LAYER STREQUAL "")
      if(kind STREQUAL "public" AND NOT owner STREQUAL LAYER)
        if(owner IN_LIST USES)
          list(APPEND included ${owner})
        else()
          set(problem "a public header of ${owner}, but ${LAYER} does not use ${owner}")
        endif()
      elseif(kind STREQUAL "private" AND NOT owner STREQUAL LAYER)
        set(problem "a private header of ${owner} (${rel}), which only ${owner} may include")
      elseif(kind STREQUAL "private" AND file_kind STREQUAL "public")
        set(problem "a private header (${rel}) in a public header, out of its users' reach")
      elseif(kind STREQUAL "outside")
        set(problem "${rel}, which is no part of the library")
      endif()
    elseif(kind STREQUAL "private")
      set(allowed FALSE)
      foreach(entry IN LISTS white_box)
        if(entry MATCHES "\\|${owner}$")
          set(allowed TRUE)
          list(APPEND looked_into "${entry}")
        endif()
      endforeach()
      if(NOT allowed)
        set(problem "a private header of ${owner} (${rel}), but no white-box test of ${owner} is built from this file")
      endif()
    endif()
    if(NOT problem STREQUAL "")
      line_of(number "${file}" "${line}")
      string(APPEND errors "  ${file}:${number}: includes ${written}, ${problem}\n")
    endif()
  endforeach()
endforeach()

if(NOT LAYER STREQUAL "")
  foreach(used IN LISTS USES)
    if(NOT used IN_LIST included)
      string(APPEND errors "  ${LAYER} declares USES ${used} but includes no public header of ${used}: the declaration is unused\n")
    endif()
  endforeach()
  if(errors)
    string(REPLACE ";" ", " uses "${USES}")
    if(uses STREQUAL "")
      set(uses "no other layer")
    endif()
    message(FATAL_ERROR "rdmx layering: layer ${LAYER} uses ${uses} (rdmx_layer in src/CMakeLists.txt):\n${errors}")
  endif()
else()
  set(declarations "")
  foreach(entry IN LISTS WHITE_BOX)
    string(REGEX REPLACE "\\|[^|]*$" "" test_layer "${entry}")
    list(APPEND declarations "${test_layer}")
  endforeach()
  list(REMOVE_DUPLICATES declarations)
  foreach(test_layer IN LISTS declarations)
    if(NOT test_layer IN_LIST looked_into)
      string(REPLACE "|" ";" parts "${test_layer}")
      list(GET parts 0 test)
      list(GET parts 1 layer)
      string(APPEND errors "  ${test} is declared WHITE_BOX ${layer} but includes no private header of ${layer}: the declaration is unused\n")
    endif()
  endforeach()
  if(errors)
    message(FATAL_ERROR "rdmx layering: ${PROGRAMS} include public headers (include/rdmx/) only; "
                        "a white-box test may include the private headers of the layer it declares "
                        "(WHITE_BOX, tests/CMakeLists.txt):\n${errors}")
  endif()
endif()
if(STAMP)
  file(TOUCH "${STAMP}")
endif()
