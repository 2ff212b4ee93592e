/* RDMX_SHARED: marks a mutable global (or function-static) variable of an
 * OpenMP program that the threads of every process must share. Optional:
 * a program built with rdmxcc or rdmx_omp_executable shares all its globals
 * and the heap blocks its master allocates (docs/omp.md, "What is shared");
 * the annotation places a variable so with any build.
 *
 *   #include "rdmx/omp/shared.h"
 *   RDMX_SHARED static double x[NA + 2];
 *
 * Built for rdmx's OpenMP runtime (RDMX_OMP_DSM defined, linked against
 * rdmx_omp) the variable lives in section rdmx_shared, which the runtime
 * places on the distributed shared memory; built for a plain OpenMP runtime
 * (libgomp) it expands to nothing. Only zero-initialized variables may be
 * shared: the section occupies no space in the file (NOBITS, so a 128 MiB
 * grid does not make a 128 MiB binary), and a constant table needs no
 * sharing, since every process holds the same copy. C and C++.
 * rdmx_shared_malloc/rdmx_shared_free do the same for heap data. */
#ifndef RDMX_OMP_SHARED_H
#define RDMX_OMP_SHARED_H

#include <stddef.h>

#if defined(RDMX_OMP_DSM)
/* The text after '#' ends the flags GCC would emit for the section, so the
 * assembler sees "aw",@nobits: writable, allocated, no file contents. */
#define RDMX_SHARED __attribute__((section("rdmx_shared,\"aw\",@nobits#"), aligned(64)))

/* Heap memory every thread of every process shares: malloc and free for
 * the data a program allocates and then hands to its parallel regions.
 * Called outside parallel regions (by the master); the memory starts
 * zeroed, is 64-byte aligned, and comes from the DSM heap (RDMX_DSM_HEAP
 * sets its size). NULL when it is exhausted. */
#ifdef __cplusplus
extern "C" {
#endif
void* rdmx_shared_malloc(size_t bytes);
void rdmx_shared_free(void* p);
#ifdef __cplusplus
}
#endif
#else
#include <stdlib.h>
#define RDMX_SHARED
#define rdmx_shared_malloc(bytes) calloc(1, (bytes))
#define rdmx_shared_free(p) free(p)
#endif

#endif
