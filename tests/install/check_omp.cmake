# Driver for the install.omp.* tests (run with cmake -P; see CMakeLists.txt):
# OpenMP programs built outside the tree for an installed rdmx_omp.
#   MODE=rdmxcc:       bin/rdmxcc and bin/rdmxc++ build omp/sum.c and
#                      omp/sum.cpp (in one command, and as -c then a link);
#                      the prefix is moved after installing: the wrappers
#                      find it from where they lie
#   MODE=find_package: omp/ as a CMake project, find_package(rdmx
#                      COMPONENTS omp) and rdmx_omp_executable
#   MODE=npb:          NPB3.0-omp-C (NPB_DIR, copied to the work directory)
#                      builds every benchmark, class S, with its own
#                      Makefile and CC = CLINK = rdmxcc
#   MODE=refusals:     what rdmxcc cannot do fails with a message naming it
# Each program runs as a job of two processes started by the installed
# bin/rdmx-run over shared memory, must print its sum once (serial code runs
# on process 0) over at least two threads, and must exit with status 0 (its
# main ends without `return`).
cmake_minimum_required(VERSION 3.20)
include(${CMAKE_CURRENT_LIST_DIR}/install_check.cmake)
require(MODE BUILD_DIR WORK_DIR SOURCE_DIR CC CXX)

set(prefix "${WORK_DIR}/prefix")

# refused(<step> <message regex> COMMAND ...): the command must fail, saying so.
function(refused step pattern)
  string(REPLACE ";" " " shown "${ARGN}")
  message(STATUS "[${MODE}] ${step}: ${shown}")
  execute_process(${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "${pattern}")
    message(FATAL_ERROR "install check failed at '${step}': exit ${rc}, expected a failure saying '${pattern}'\n"
                        "--- stdout\n${out}\n--- stderr\n${err}")
  endif()
endfunction()

# launch(<program>): a job of two over shared memory; checks its output.
function(launch program)
  run("launch ${program}" COMMAND ${prefix}/bin/rdmx-run --tls shm -np 2 ${program})
  string(REGEX MATCHALL "omp sum 5000050000 over ([0-9]+) threads" sums "${run_output}")
  list(LENGTH sums n)
  if(NOT n EQUAL 1 OR CMAKE_MATCH_1 LESS 2)
    message(FATAL_ERROR "install check failed: ${program} on 2 processes printed '${run_output}', "
                        "expected 'omp sum 5000050000 over N threads' once, N at least 2")
  endif()
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
if(MODE STREQUAL "rdmxcc")
  # Installed elsewhere, then moved where the test uses it.
  install_build(${WORK_DIR}/installed)
  file(RENAME "${WORK_DIR}/installed" "${prefix}")
else()
  install_build(${prefix})
endif()
set(rdmxcc "${prefix}/bin/rdmxcc")
set(rdmxcxx "${prefix}/bin/rdmxc++")

if(MODE STREQUAL "rdmxcc")
  run("showme" COMMAND ${rdmxcc} --showme -fopenmp -O2 ${SOURCE_DIR}/sum.c -o ${WORK_DIR}/sum)
  if(NOT run_output MATCHES "-Wl,--wrap=main" OR NOT run_output MATCHES "-I${prefix}/include"
     OR NOT run_output MATCHES "-Wl,-T,${prefix}/[^ ]*/rdmx_shared.ld")
    message(FATAL_ERROR "install check failed: rdmxcc --showme printed '${run_output}'")
  endif()
  if(EXISTS "${WORK_DIR}/sum")
    message(FATAL_ERROR "install check failed: rdmxcc --showme built ${WORK_DIR}/sum")
  endif()
  run("compile and link" COMMAND ${rdmxcc} -fopenmp -O2 ${SOURCE_DIR}/sum.c -o ${WORK_DIR}/sum)
  launch(${WORK_DIR}/sum)
  run("compile" COMMAND ${rdmxcc} -fopenmp -O2 -c ${SOURCE_DIR}/sum.c -o ${WORK_DIR}/sum.o)
  run("link" COMMAND ${rdmxcc} -fopenmp ${WORK_DIR}/sum.o -o ${WORK_DIR}/sum_linked)
  launch(${WORK_DIR}/sum_linked)
  run("compile and link C++" COMMAND ${rdmxcxx} -fopenmp -O2 ${SOURCE_DIR}/sum.cpp -o ${WORK_DIR}/sum_cxx)
  launch(${WORK_DIR}/sum_cxx)
elseif(MODE STREQUAL "find_package")
  configure_against(${prefix} ${SOURCE_DIR} ${WORK_DIR}/build -DCMAKE_C_COMPILER=${CC} -DCMAKE_CXX_COMPILER=${CXX})
  run("build" COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
  launch(${WORK_DIR}/build/sum)
  launch(${WORK_DIR}/build/sum_cxx)
  run("reference" COMMAND ${WORK_DIR}/build/sum_libgomp)
  if(NOT run_output MATCHES "omp sum 5000050000 over")
    message(FATAL_ERROR "install check failed: the libgomp reference printed '${run_output}'")
  endif()
elseif(MODE STREQUAL "npb")
  # NPB's way (its README): config/make.def from the template, naming the
  # compiler and linker, and config/suite.def listing each benchmark and
  # class. rdmxcc adds -fopenmp itself; the template's flags stay.
  set(npb "${WORK_DIR}/NPB3.0-omp-C")
  file(COPY "${NPB_DIR}/" DESTINATION "${npb}")
  file(MAKE_DIRECTORY "${npb}/bin")
  file(READ "${npb}/config/make.def.template" def)
  string(REGEX REPLACE "\nCC[ \t]*=[^\n]*" "\nCC = rdmxcc" def "${def}")
  string(REGEX REPLACE "\nCLINK[ \t]*=[^\n]*" "\nCLINK = rdmxcc" def "${def}")
  string(REGEX REPLACE "\nC_LIB[ \t]*=[^\n]*" "\nC_LIB = -lm" def "${def}")
  file(WRITE "${npb}/config/make.def" "${def}")
  set(benchmarks bt cg ep ft is lu mg sp)
  set(suite "")
  foreach(b IN LISTS benchmarks)
    string(APPEND suite "${b}\tS\n")
  endforeach()
  file(WRITE "${npb}/config/suite.def" "${suite}")
  find_program(MAKE NAMES make gmake REQUIRED)
  set(ENV{PATH} "${prefix}/bin:$ENV{PATH}")
  run("make suite" COMMAND ${MAKE} suite WORKING_DIRECTORY ${npb})
  set(missing "")
  foreach(b IN LISTS benchmarks)
    if(NOT EXISTS "${npb}/bin/${b}.S")
      list(APPEND missing ${b}.S)
    endif()
  endforeach()
  if(missing)
    message(FATAL_ERROR "install check failed: NPB built no ${missing}\n--- stdout\n${run_output}\n--- stderr\n${run_error}")
  endif()
  # Built by rdmxcc: main wrapped, GOMP_* from rdmx_omp, never libgomp.
  find_program(NM NAMES nm REQUIRED)
  foreach(b IN LISTS benchmarks)
    run("symbols of ${b}.S" COMMAND ${NM} ${npb}/bin/${b}.S)
    if(NOT run_output MATCHES "T __wrap_main\n" OR run_output MATCHES "GOMP_[a-z_]+@")
      message(FATAL_ERROR "install check failed: ${b}.S is not linked against rdmx_omp alone")
    endif()
  endforeach()
elseif(MODE STREQUAL "refusals")
  refused("missing source" "rdmxcc: ${WORK_DIR}/missing.c: no such file"
          COMMAND ${rdmxcc} -fopenmp ${WORK_DIR}/missing.c -o ${WORK_DIR}/missing)
  file(WRITE "${WORK_DIR}/lib.c" "int f(void) { return 1; }\n")
  refused("-shared" "rdmxcc: -shared: not for rdmx_omp, whose programs are position-dependent executables"
          COMMAND ${rdmxcc} -fopenmp -shared ${WORK_DIR}/lib.c -o ${WORK_DIR}/lib.so)
  refused("-fPIE" "rdmxcc: -fPIE: not for rdmx_omp"
          COMMAND ${rdmxcc} -fopenmp -fPIE -c ${WORK_DIR}/lib.c -o ${WORK_DIR}/lib.o)
  refused("-pie" "rdmxc[+][+]: -pie: not for rdmx_omp"
          COMMAND ${rdmxcxx} -pie ${WORK_DIR}/lib.c -o ${WORK_DIR}/lib)
  foreach(f missing lib.so lib.o lib)
    if(EXISTS "${WORK_DIR}/${f}")
      message(FATAL_ERROR "install check failed: a refused command wrote ${WORK_DIR}/${f}")
    endif()
  endforeach()
else()
  message(FATAL_ERROR "install check failed: unknown MODE=${MODE}")
endif()
message("omp ok (${MODE})")
