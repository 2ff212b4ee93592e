# Building OpenMP programs for rdmx's OpenMP runtime on the DSM (docs/omp-build.md).
#
# The one definition of how such a program is compiled and linked. rdmx's
# own build includes this file; it is installed beside rdmxConfig.cmake,
# which includes it for find_package(rdmx COMPONENTS omp); and the compiler
# wrappers rdmxcc and rdmxc++ (cmake/rdmxcc.in) are configured from its
# variables. Wherever it is included, the target rdmx::omp (the library
# rdmx_omp) must exist.
#
# rdmx_omp_executable(target sources...)
#   The sources are ordinary `#pragma omp` C or C++ with an ordinary main.
#   The link wraps main: the C start-up code calls rdmx_omp's __wrap_main,
#   which starts the rdmx job and runs the program's main on process 0
#   while every other thread of every process joins its parallel regions.
#   Launch it like any rdmx program (rdmx-run -np P program
#   [--rdmx-threads=T] args...).
# rdmx_omp_reference_executable(target sources...)
#   The same sources against GCC's libgomp: one process, the reference.

# Where the linker puts the program's globals: rdmx_omp_object (run on every
# object the program's sources compile to) renames their .data to section
# rdmx_shared_data and their .bss to rdmx_shared, where RDMX_SHARED
# variables go too; the linker script places the two one after the other at
# a fixed address (non-PIE: the same in every process), and the DSM heap is
# placed to end with them (the kernel starts the program's brk heap right
# after them). Code of the default (small) model reaches data through 32-bit
# addresses, so they must end below 2 GiB: at 1 GiB they may take up to
# 1 GiB, and the rest of the DSM heap (the master's stack, the program's
# heap) lies below. rdmx_omp reads their bounds at start-up, so any address
# below 2 GiB that leaves room for the heap works; nothing else depends on it.
set(RDMX_OMP_SHARED_ADDRESS 0x40000000 CACHE STRING "Link address of the program's globals")
# They also end on a 64 KiB boundary, so that a DSM block of up to 64 KiB
# never reaches past them into the brk heap (which starts right there when
# the kernel does not randomize it). The initialized data is loaded from the
# file; the zeroed data takes no room in it (NOLOAD), so a 128 MiB grid does
# not make a 128 MiB binary.
set(RDMX_OMP_LINKER_SCRIPT ${CMAKE_CURRENT_BINARY_DIR}/rdmx_shared.ld)
file(CONFIGURE OUTPUT ${RDMX_OMP_LINKER_SCRIPT} @ONLY
     CONTENT "SECTIONS {
  rdmx_shared_data @RDMX_OMP_SHARED_ADDRESS@ : { __rdmx_shared_begin = .; *(rdmx_shared_data) __rdmx_shared_data_end = .; }
  rdmx_shared (NOLOAD) : { *(rdmx_shared) . = ALIGN(65536); __rdmx_shared_end = .; }
}
INSERT AFTER .bss;
")
# The program that moves an object's globals and routes its allocations
# and exit handlers to rdmx_omp (cmake/rdmx_omp_object): rdmxcc runs it
# after each compile, and rdmx_omp_executable as the compiler launcher.
set(RDMX_OMP_OBJECT_TOOL ${CMAKE_CURRENT_LIST_DIR}/rdmx_omp_object)

# -fno-inline-atomics: reductions and `omp atomic` become __atomic_* calls,
# which rdmx_omp serializes under a DSM mutex when they touch shared memory.
# -fno-pie (and -no-pie below): outlined regions and `critical` names are
# compared and called by address across processes.
# -mno-red-zone: a full fence becomes a call (rdmx_omp_object), whose return
# address would overwrite a leaf function's data below its stack pointer.
# -fno-common: a tentative definition (`int x;` in two files) is .bss in its
# object, where rdmx_omp_object finds it, not a common symbol the linker
# places among the private data.
set(RDMX_OMP_COMPILE_OPTIONS -fopenmp -fno-inline-atomics -fno-pie -fno-common -mno-red-zone)
# rdmx/omp/shared.h: RDMX_SHARED places a variable in section rdmx_shared.
set(RDMX_OMP_COMPILE_DEFINITIONS RDMX_OMP_DSM)
# No -fopenmp at link time: GOMP_* come from rdmx_omp, never from libgomp.
# --wrap=main: the start-up code calls rdmx_omp's __wrap_main, and the
# program's main keeps its name (and C's implicit `return 0`).
# --wrap=exit: exit() on process 0 ends the whole job in order.
# The linker script goes with these as -Wl,-T,<script>.
set(RDMX_OMP_LINK_OPTIONS -no-pie -Wl,--wrap=main -Wl,--wrap=exit)

function(rdmx_omp_executable target)
  add_executable(${target} ${ARGN})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
  target_compile_options(${target} PRIVATE ${RDMX_OMP_COMPILE_OPTIONS})
  # Each object through rdmx_omp_object, before any launcher the build set.
  foreach(language C CXX)
    if(CMAKE_${language}_COMPILER_LAUNCHER)
      set(launcher ${RDMX_OMP_OBJECT_TOOL} --launch ${CMAKE_${language}_COMPILER_LAUNCHER})
    else()
      set(launcher ${RDMX_OMP_OBJECT_TOOL} --launch)
    endif()
    set_property(TARGET ${target} PROPERTY ${language}_COMPILER_LAUNCHER ${launcher})
  endforeach()
  target_compile_definitions(${target} PRIVATE ${RDMX_OMP_COMPILE_DEFINITIONS})
  target_link_options(${target} PRIVATE ${RDMX_OMP_LINK_OPTIONS} "-Wl,-T,${RDMX_OMP_LINKER_SCRIPT}")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${RDMX_OMP_LINKER_SCRIPT})
  target_link_libraries(${target} PRIVATE rdmx::omp)
endfunction()

function(rdmx_omp_reference_executable target)
  add_executable(${target} ${ARGN})
  target_compile_options(${target} PRIVATE -fopenmp)
  target_link_options(${target} PRIVATE -fopenmp)
  # rdmx/omp/shared.h only, which without RDMX_OMP_DSM annotates nothing.
  target_include_directories(${target} PRIVATE $<TARGET_PROPERTY:rdmx::omp,INTERFACE_INCLUDE_DIRECTORIES>)
endfunction()
