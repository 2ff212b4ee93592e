# Driver for the install.* tests (run with cmake -P; see CMakeLists.txt).
#   MODE=find_package: install, then configure/build/run consumer/ with CMake
#   MODE=pkg_config:   install, then compile consumer/main.cpp with one g++
#                      line from `pkg-config --cflags --libs rdmx`
# Every step must succeed; the consumer must print "consumer ok", alone and
# as a job of two started by the installed bin/rdmx-run.
cmake_minimum_required(VERSION 3.20)
include(${CMAKE_CURRENT_LIST_DIR}/install_check.cmake)
require(MODE BUILD_DIR WORK_DIR CONSUMER_DIR CXX VERSION)

set(prefix "${WORK_DIR}/prefix")

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# (a) install the current build tree into a scratch prefix
install_build(${prefix})

foreach(f include/rdmx/transfer/context.hpp)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "install check failed: ${prefix}/${f} not installed")
  endif()
endforeach()

# (b) build the consumer against the prefix, then run it
set(exe "${WORK_DIR}/rdmx-consumer")
if(MODE STREQUAL "find_package")
  configure_against(${prefix} ${CONSUMER_DIR} ${WORK_DIR}/build -DCMAKE_CXX_COMPILER=${CXX})
  run("build consumer" COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
  set(exe "${WORK_DIR}/build/rdmx-consumer")
elseif(MODE STREQUAL "pkg_config")
  find_program(PKG_CONFIG_EXECUTABLE NAMES pkg-config pkgconf REQUIRED)
  file(GLOB_RECURSE pc_files "${prefix}/*/rdmx.pc")
  list(LENGTH pc_files n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "install check failed: expected one rdmx.pc under ${prefix}, found: ${pc_files}")
  endif()
  get_filename_component(pc_dir "${pc_files}" DIRECTORY)
  if(DEFINED ENV{PKG_CONFIG_PATH} AND NOT "$ENV{PKG_CONFIG_PATH}" STREQUAL "")
    set(ENV{PKG_CONFIG_PATH} "${pc_dir}:$ENV{PKG_CONFIG_PATH}")
  else()
    set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
  endif()
  run("pkg-config version" COMMAND ${PKG_CONFIG_EXECUTABLE} --modversion rdmx)
  string(STRIP "${run_output}" pc_version)
  if(NOT pc_version STREQUAL VERSION)
    message(FATAL_ERROR "install check failed: pkg-config says rdmx ${pc_version}, the build is ${VERSION}")
  endif()
  run("pkg-config flags" COMMAND ${PKG_CONFIG_EXECUTABLE} --cflags --libs rdmx)
  string(STRIP "${run_output}" flags)
  message(STATUS "[${MODE}] pkg-config --cflags --libs rdmx: ${flags}")
  string(FIND "${flags}" "-I${prefix}/include" at)
  if(at LESS 0)
    # pkgconf may print the path un-normalised (.../lib/pkgconfig/../../include)
    string(FIND "${flags}" "-I${pc_dir}/" at)
  endif()
  if(at LESS 0)
    message(FATAL_ERROR "install check failed: pkg-config --cflags does not point into ${prefix}: ${flags}")
  endif()
  separate_arguments(flag_list UNIX_COMMAND "${flags}")
  run("compile consumer"
      COMMAND ${CXX} -std=c++20 -O1 ${CONSUMER_DIR}/main.cpp ${flag_list} -o ${exe})
else()
  message(FATAL_ERROR "install check failed: unknown MODE=${MODE}")
endif()

run("run consumer" COMMAND ${exe})
if(NOT run_output MATCHES "consumer ok")
  message(FATAL_ERROR "install check failed: consumer printed '${run_output}', expected 'consumer ok'")
endif()

# (c) the installed launcher explains itself, refuses a bad argument with
# exit status 2, and starts the consumer as a job of two processes
set(launcher "${prefix}/bin/rdmx-run")
run("launcher help" COMMAND ${launcher} --help)
if(NOT run_output MATCHES "rdmx-run -np N")
  message(FATAL_ERROR "install check failed: rdmx-run --help printed '${run_output}'")
endif()
execute_process(COMMAND ${launcher} --tls -np 2 ${exe} RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 2 OR NOT err MATCHES "--tls wants a value")
  message(FATAL_ERROR "install check failed: rdmx-run --tls without a value exited ${rc}: ${err}")
endif()
run("launch consumer" COMMAND ${launcher} --tls shm -np 2 ${exe})
string(REGEX MATCHALL "consumer ok" oks "${run_output}")
list(LENGTH oks n)
if(NOT n EQUAL 2)
  message(FATAL_ERROR "install check failed: rdmx-run -np 2 printed '${run_output}', expected 'consumer ok' twice")
endif()
message("consumer ok (${MODE})")
