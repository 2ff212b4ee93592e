/* A kernel that forgets one RDMX_SHARED annotation: check-shared must
 * name `forgotten` and only it; count-changes counts one annotated line
 * (not this comment) and one include. */
#include "rdmx/omp/shared.h"

RDMX_SHARED static double remembered[8];
static double forgotten[8];

double touch(int i) {
  remembered[i] = i;
  forgotten[i] = 2 * i;
  return remembered[i] + forgotten[i];
}
