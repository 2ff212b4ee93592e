/* The NPB generator of apps/npb/common: x(k+1) = a x(k) mod 2^46. Checks
 * the modulus on operands whose product overflows 2^46 (and 2^64), that
 * vranlc is randlc repeated, and that skipping ahead with npb_lcg_power
 * lands where stepping does: the kernels' verification depends on all
 * three. Exit status 0 when every check holds. */
#include <stdio.h>

#include "common/npb.h"

static int failures = 0;

static void expect_equal(const char *what, double got, double want) {
  if (got != want) {
    printf("FAILED %s: got %.17g, want %.17g\n", what, got, want);
    failures++;
  }
}

int main(void) {
  const double a = NPB_LCG_MULTIPLIER;
  const double two46 = 70368744177664.0; /* 2^46 */

  /* a (2^46 - 1) = -a mod 2^46; the 64-bit product of these wraps too. */
  double x = two46 - 1.0;
  double value = npb_randlc(&x, a);
  expect_equal("a (2^46 - 1) mod 2^46", x, two46 - a);
  expect_equal("the value is x 2^-46", value, (two46 - a) / two46);
  x = two46 - 1.0;
  npb_randlc(&x, two46 - 1.0);
  expect_equal("(2^46 - 1)^2 mod 2^46", x, 1.0);
  x = two46 / 2 + 1.0;
  npb_randlc(&x, 3.0);
  expect_equal("3 (2^45 + 1) mod 2^46", x, two46 / 2 + 3.0);
  x = 3.0;
  npb_randlc(&x, 5.0);
  expect_equal("small operands", x, 15.0);

  /* vranlc is randlc n times. */
  enum { N = 1000 };
  double stepped = 314159265.0, batched = 314159265.0, values[N];
  npb_vranlc(N, &batched, a, values);
  for (int i = 0; i < N; i++) {
    double next = npb_randlc(&stepped, a);
    if (next != values[i]) {
      expect_equal("vranlc value", values[i], next);
      break;
    }
  }
  expect_equal("vranlc leaves the seed where n steps do", batched, stepped);

  /* Skipping n steps is multiplying by a^n. */
  double skipped = 314159265.0;
  npb_randlc(&skipped, npb_lcg_power(a, N));
  expect_equal("a^n skips n steps", skipped, stepped);
  expect_equal("a^0 is 1", npb_lcg_power(a, 0), 1.0);
  double big = 271828183.0, walked = 271828183.0;
  npb_randlc(&big, npb_lcg_power(a, (uint64_t)1 << 40));
  double square = a;
  for (int i = 0; i < 40; i++) npb_randlc(&square, square); /* a^(2^40) by squaring */
  npb_randlc(&walked, square);
  expect_equal("a^(2^40) by powering and by squaring", big, walked);

  if (failures == 0) printf("generator: every check holds\n");
  return failures == 0 ? 0 : 1;
}
