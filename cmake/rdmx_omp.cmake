# Building OpenMP programs for rdmx's OpenMP runtime on the DSM (docs/omp.md).
#
# rdmx_omp_executable(target sources...)
#   The sources are ordinary `#pragma omp` C or C++; the program's main is
#   renamed rdmx_omp_main and rdmx_omp supplies the real main(), which starts
#   the rdmx job and runs rdmx_omp_main on process 0 while every other thread
#   of every process joins its parallel regions. Launch it like any rdmx
#   program (scripts/run -np P program [--rdmx-threads=T] args...).
# rdmx_omp_reference_executable(target sources...)
#   The same sources against GCC's libgomp: one process, the reference.

# Where the linker puts section rdmx_shared (RDMX_SHARED variables): the DSM
# heap is placed to end with it (the kernel starts the program's brk heap
# right after it). Non-PIE, so the address is the same in every process.
# Code of the default (small) model reaches data through 32-bit addresses,
# so the section must end below 2 GiB: at 1 GiB it may hold up to 1 GiB, and
# the rest of the DSM heap (the master's stack, RDMX_DSM_HEAP) lies below.
set(RDMX_OMP_SHARED_ADDRESS 0x40000000 CACHE STRING "Link address of section rdmx_shared")
# The section also ends on a 64 KiB boundary, so that a DSM block of up to
# 64 KiB never reaches past it into the brk heap (which starts right there
# when the kernel does not randomize it).
set(RDMX_OMP_LINKER_SCRIPT ${CMAKE_CURRENT_BINARY_DIR}/rdmx_shared.ld)
file(CONFIGURE OUTPUT ${RDMX_OMP_LINKER_SCRIPT} @ONLY
     CONTENT "SECTIONS {\n  rdmx_shared @RDMX_OMP_SHARED_ADDRESS@ (NOLOAD) : { *(rdmx_shared) . = ALIGN(65536); }\n}\nINSERT AFTER .bss;\n")

function(rdmx_omp_executable target)
  add_executable(${target} ${ARGN})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
  # -fno-inline-atomics: reductions and `omp atomic` become __atomic_* calls,
  # which rdmx_omp serializes under a DSM mutex when they touch shared memory.
  target_compile_options(${target} PRIVATE -fopenmp -fno-inline-atomics -fno-pie)
  target_compile_definitions(${target} PRIVATE RDMX_OMP_DSM main=rdmx_omp_main)
  # No -fopenmp at link time: GOMP_* come from rdmx_omp, never from libgomp.
  # --wrap=exit: exit() on process 0 ends the whole job in order.
  target_link_options(${target} PRIVATE -no-pie "-Wl,-T,${RDMX_OMP_LINKER_SCRIPT}" -Wl,--wrap=exit)
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${RDMX_OMP_LINKER_SCRIPT})
  target_link_libraries(${target} PRIVATE rdmx_omp)
endfunction()

function(rdmx_omp_reference_executable target)
  add_executable(${target} ${ARGN})
  target_compile_options(${target} PRIVATE -fopenmp)
  target_link_options(${target} PRIVATE -fopenmp)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/include)
endfunction()
