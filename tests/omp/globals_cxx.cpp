// A C++ OpenMP program with no annotation: global objects built before main
// and destroyed after it (once, with their shared state), containers and
// strings grown by main, read by every thread of every process.
#include <omp.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {
struct Tracker {
  int built = 0;
  Tracker() : built(7) {}
  ~Tracker() { std::printf("globals_cxx: destructor ran, built %d, uses %d\n", built, uses); }
  int uses = 0;
};
}  // namespace

Tracker tracker;                      // a constructor before main, a destructor after
std::vector<double> values;           // grown by main
std::string text;                     // grown by main, partly in libstdc++'s own code
std::map<int, long> squares;          // nodes allocated by main
std::unique_ptr<long[]> counts;       // operator new[]
const std::string label = "short";    // fits the string itself: no allocation before main

int main() {
  values.resize(5000);
  for (int i = 0; i < 5000; ++i) values[i] = i * 0.25;
  text = "a string longer than the small-string buffer";
  text += ", appended";
  text.append(100, 'x');
  for (int i = 0; i < 200; ++i) squares[i] = static_cast<long>(i) * i;
  counts = std::make_unique<long[]>(64);
  tracker.uses = 1;

  const std::string expect = std::string("a string longer than the small-string buffer, appended") + std::string(100, 'x');
  long bad = 0;
#pragma omp parallel reduction(+ : bad)
  {
    for (int i = 0; i < 5000; ++i) bad += values[i] != i * 0.25;
    bad += text != expect;
    for (int i = 0; i < 200; ++i) bad += squares.at(i) != static_cast<long>(i) * i;
    bad += tracker.built != 7;
    bad += label != "short";
    std::vector<int> mine(100, omp_get_thread_num());  // each thread's own
    for (int v : mine) bad += v != omp_get_thread_num();
#pragma omp atomic
    counts[omp_get_thread_num() % 64] += 1;
    if (bad != 0) std::printf("globals_cxx: FAILED on thread %d: %ld wrong values\n", omp_get_thread_num(), bad);
  }
  long total = 0;
  for (int i = 0; i < 64; ++i) total += counts[i];
  if (total != omp_get_max_threads()) ++bad;
  values.clear();
  values.shrink_to_fit();
  std::printf("globals_cxx: %s over %d threads\n", bad == 0 ? "all checks passed" : "FAILED", omp_get_max_threads());
  return bad == 0 ? 0 : 1;
}
