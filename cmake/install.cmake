# Installation: the rdmx library, its public headers, a CMake package
# (find_package(rdmx) -> rdmx::rdmx), a pkg-config file (rdmx.pc) and the
# job launcher bin/rdmx-run (scripts/run); and the OpenMP runtime on the
# DSM: the library rdmx_omp, the package's component omp
# (find_package(rdmx COMPONENTS omp) -> rdmx::omp, rdmx_omp_executable) and
# the compiler wrappers bin/rdmxcc and bin/rdmxc++ (docs/omp-build.md).
#
# The library is static by default (src/CMakeLists.txt does not force a
# type), and a static archive records none of its dependencies. So both
# package files carry rdmx's private dependencies (PMIx, hwloc, libnuma) for
# the static case: the CMake package re-creates the PkgConfig:: targets the
# export refers to, and rdmx.pc lists them in Requires for a static library
# (a plain `pkg-config --libs rdmx` must be enough to link) and in
# Requires.private for a shared one. Both files are relocatable: they locate
# the prefix from their own position, so `cmake --install build --prefix X`
# works for any X.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(RDMX_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/rdmx"
    CACHE STRING "Where rdmxConfig.cmake is installed, relative to the prefix")
set(RDMX_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig"
    CACHE STRING "Where rdmx.pc is installed, relative to the prefix")

install(TARGETS rdmx
  EXPORT rdmxTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/run DESTINATION ${CMAKE_INSTALL_BINDIR} RENAME rdmx-run)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/rdmx
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h" PATTERN "*.ipp")

install(EXPORT rdmxTargets
  NAMESPACE rdmx::
  FILE rdmxTargets.cmake
  DESTINATION ${RDMX_INSTALL_CMAKEDIR})

get_target_property(RDMX_LIBRARY_TYPE rdmx TYPE)
if(RDMX_LIBRARY_TYPE STREQUAL "STATIC_LIBRARY")
  set(RDMX_STATIC ON)
else()
  set(RDMX_STATIC OFF)
endif()

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/rdmxConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/rdmxConfig.cmake
  INSTALL_DESTINATION ${RDMX_INSTALL_CMAKEDIR})
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/cmake/rdmxConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)  # 0.x: a minor bump may break the API
install(FILES
  ${PROJECT_BINARY_DIR}/cmake/rdmxConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/rdmxConfigVersion.cmake
  DESTINATION ${RDMX_INSTALL_CMAKEDIR})

# _rdmx_up_to_prefix(out dir): the relative path from the installed
# directory <prefix>/<dir> back to the prefix ("../.." for lib/pkgconfig),
# for files that find the prefix from where they lie.
function(_rdmx_up_to_prefix out dir)
  if(IS_ABSOLUTE "${dir}")
    file(RELATIVE_PATH up "${dir}" "${CMAKE_INSTALL_PREFIX}")
  else()
    file(RELATIVE_PATH up "/root/${dir}" "/root")
  endif()
  string(REGEX REPLACE "/$" "" up "${up}")
  set(${out} "${up}" PARENT_SCOPE)
endfunction()

# rdmx.pc: prefix is computed from ${pcfiledir} so the file is relocatable.
if(IS_ABSOLUTE "${RDMX_INSTALL_PKGCONFIGDIR}")
  set(RDMX_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  _rdmx_up_to_prefix(_rdmx_pc_up "${RDMX_INSTALL_PKGCONFIGDIR}")
  set(RDMX_PC_PREFIX "\${pcfiledir}/${_rdmx_pc_up}")
endif()
foreach(_rdmx_dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_rdmx_dir}}")
    set(RDMX_PC_${_rdmx_dir} "${CMAKE_INSTALL_${_rdmx_dir}}")
  else()
    set(RDMX_PC_${_rdmx_dir} "\${prefix}/${CMAKE_INSTALL_${_rdmx_dir}}")
  endif()
endforeach()
set(RDMX_PC_PRIVATE_DEPS "pmix hwloc numa")
if(RDMX_STATIC)
  set(RDMX_PC_REQUIRES "ucx ${RDMX_PC_PRIVATE_DEPS}")
  set(RDMX_PC_REQUIRES_PRIVATE "")
else()
  set(RDMX_PC_REQUIRES "ucx")
  set(RDMX_PC_REQUIRES_PRIVATE "${RDMX_PC_PRIVATE_DEPS}")
endif()
# A sanitized librdmx.a (RDMX_SANITIZE) links only with the sanitizer runtimes.
if(RDMX_SANITIZE)
  set(RDMX_PC_SANITIZE_LIBS "-fsanitize=${RDMX_SANITIZE}")
else()
  set(RDMX_PC_SANITIZE_LIBS "")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/rdmx.pc.in ${PROJECT_BINARY_DIR}/rdmx.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/rdmx.pc DESTINATION ${RDMX_INSTALL_PKGCONFIGDIR})

# The OpenMP runtime on the DSM. Its package file is cmake/rdmx_omp.cmake
# itself, the one definition of the options such a program is built with;
# the wrappers are configured here from the same variables, and take the
# linker script that file generated in this build.
install(TARGETS rdmx_omp
  EXPORT rdmxOmpTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT rdmxOmpTargets
  NAMESPACE rdmx::
  FILE rdmxOmpTargets.cmake
  DESTINATION ${RDMX_INSTALL_CMAKEDIR})
install(FILES ${CMAKE_CURRENT_LIST_DIR}/rdmx_omp.cmake DESTINATION ${RDMX_INSTALL_CMAKEDIR})
install(PROGRAMS ${RDMX_OMP_OBJECT_TOOL} DESTINATION ${RDMX_INSTALL_CMAKEDIR})
install(FILES ${RDMX_OMP_LINKER_SCRIPT} DESTINATION ${CMAKE_INSTALL_LIBDIR}/rdmx)

# What librdmx.a needs at link time, as compiler arguments: its own link
# options (LINKER:... as -Wl,...), UCX and, for a static library, its
# private dependencies; rdmx.pc lists the same.
set(_rdmx_wrapper_libraries "")
get_target_property(_rdmx_link_options rdmx INTERFACE_LINK_OPTIONS)
foreach(_rdmx_option IN LISTS _rdmx_link_options)
  string(REGEX REPLACE "^LINKER:" "-Wl," _rdmx_option "${_rdmx_option}")
  list(APPEND _rdmx_wrapper_libraries "${_rdmx_option}")
endforeach()
list(APPEND _rdmx_wrapper_libraries ${UCX_LDFLAGS})
if(RDMX_STATIC)
  list(APPEND _rdmx_wrapper_libraries ${PMIX_LDFLAGS} ${HWLOC_LDFLAGS} ${NUMA_LIBRARY})
endif()
list(APPEND _rdmx_wrapper_libraries -pthread ${RDMX_PC_SANITIZE_LIBS})
set(_rdmx_wrapper_compile_options ${RDMX_OMP_COMPILE_OPTIONS})
foreach(_rdmx_definition IN LISTS RDMX_OMP_COMPILE_DEFINITIONS)
  list(APPEND _rdmx_wrapper_compile_options "-D${_rdmx_definition}")
endforeach()
list(JOIN _rdmx_wrapper_compile_options " " RDMX_WRAPPER_COMPILE_OPTIONS)
list(JOIN RDMX_OMP_LINK_OPTIONS " " RDMX_WRAPPER_LINK_OPTIONS)
_rdmx_up_to_prefix(RDMX_WRAPPER_UP "${CMAKE_INSTALL_BINDIR}")
# rdmxcc links with the C compiler: rdmx's C++ runtime libraries are named.
foreach(_rdmx_wrapper rdmxcc rdmxc++)
  if(_rdmx_wrapper STREQUAL "rdmxcc")
    set(RDMX_WRAPPER_LANGUAGE C)
    set(RDMX_WRAPPER_COMPILER "${CMAKE_C_COMPILER}")
    set(RDMX_WRAPPER_ENV RDMX_CC)
    set(_rdmx_runtime -lstdc++ -lm)
  else()
    set(RDMX_WRAPPER_LANGUAGE C++)
    set(RDMX_WRAPPER_COMPILER "${CMAKE_CXX_COMPILER}")
    set(RDMX_WRAPPER_ENV RDMX_CXX)
    set(_rdmx_runtime "")
  endif()
  set(RDMX_WRAPPER_NAME ${_rdmx_wrapper})
  list(JOIN _rdmx_wrapper_libraries " " RDMX_WRAPPER_LIBRARIES)
  if(_rdmx_runtime)
    string(JOIN " " RDMX_WRAPPER_LIBRARIES ${RDMX_WRAPPER_LIBRARIES} ${_rdmx_runtime})
  endif()
  configure_file(${CMAKE_CURRENT_LIST_DIR}/rdmxcc.in ${PROJECT_BINARY_DIR}/${_rdmx_wrapper} @ONLY)
  install(PROGRAMS ${PROJECT_BINARY_DIR}/${_rdmx_wrapper} DESTINATION ${CMAKE_INSTALL_BINDIR})
endforeach()
