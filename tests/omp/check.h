/* CHECK(cond, printf-args): counts and prints a failed check of an OpenMP
 * test program; the program ends with failures == 0 ? 0 : 1. */
#ifndef RDMX_TESTS_OMP_CHECK_H
#define RDMX_TESTS_OMP_CHECK_H
#include <stdio.h>

static int failures;
#define CHECK(cond, ...)                            \
  do {                                              \
    if (!(cond)) {                                  \
      printf("FAILED %s:%d: ", __FILE__, __LINE__); \
      printf(__VA_ARGS__);                          \
      printf("\n");                                 \
      failures++;                                   \
    }                                               \
  } while (0)

#endif
