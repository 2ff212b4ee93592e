# What the install check drivers (cmake -P: check_install.cmake,
# check_omp.cmake) share. They set MODE, which the messages name.

# require(VAR...): each -DVAR=... given, not empty.
function(require)
  foreach(v IN LISTS ARGN)
    if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
      message(FATAL_ERROR "install check failed: -D${v}=... missing")
    endif()
  endforeach()
endfunction()

# run(<step> COMMAND ...): run a command, echo it, fail loudly with its
# output; run_output and run_error hold what it printed.
function(run step)
  string(REPLACE ";" " " shown "${ARGN}")
  message(STATUS "[${MODE}] ${step}: ${shown}")
  execute_process(${ARGN}
                  RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install check failed at '${step}' (exit ${rc})\n--- stdout\n${out}\n--- stderr\n${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
  set(run_error "${err}" PARENT_SCOPE)
endfunction()

# install_build(<prefix>): install BUILD_DIR (configuration CONFIG, if
# given) into <prefix>.
function(install_build prefix)
  set(config_args)
  if(CONFIG)
    set(config_args --config ${CONFIG})
  endif()
  run("install" COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} ${config_args})
endfunction()

# configure_against(<prefix> <source> <build> [cmake options...]): configure
# the CMake project <source>, which prints "rdmx <version> from <rdmx_DIR>",
# with only <prefix> to provide rdmx: no package registries, no
# PKG_CONFIG_PATH tricks (UCX itself still comes from the system's
# pkg-config path). Fails unless find_package(rdmx) used <prefix>.
function(configure_against prefix source build)
  run("configure ${source}"
      COMMAND ${CMAKE_COMMAND} -S ${source} -B ${build}
              -DCMAKE_BUILD_TYPE=Release
              -DCMAKE_PREFIX_PATH=${prefix}
              -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
              -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
              ${ARGN})
  if(NOT run_output MATCHES "rdmx [0-9.]+ from ([^\n]*)")
    message(FATAL_ERROR "install check failed: ${source} did not report where rdmx came from")
  endif()
  string(FIND "${CMAKE_MATCH_1}" "${prefix}/" at)
  if(NOT at EQUAL 0)
    message(FATAL_ERROR "install check failed: find_package(rdmx) used ${CMAKE_MATCH_1}, not the scratch prefix ${prefix}")
  endif()
endfunction()
