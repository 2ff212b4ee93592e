# Installation: the rdmx library, its public headers, a CMake package
# (find_package(rdmx) -> rdmx::rdmx), a pkg-config file (rdmx.pc) and the
# job launcher bin/rdmx-run (scripts/run).
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

# rdmx.pc: prefix is computed from ${pcfiledir} so the file is relocatable.
if(IS_ABSOLUTE "${RDMX_INSTALL_PKGCONFIGDIR}")
  set(RDMX_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _rdmx_pc_up "/root/${RDMX_INSTALL_PKGCONFIGDIR}" "/root")
  string(REGEX REPLACE "/$" "" _rdmx_pc_up "${_rdmx_pc_up}")
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
