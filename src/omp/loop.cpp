// Work-sharing constructs: loops over long and unsigned long long (static,
// dynamic, guided, runtime schedules), sections (a dynamic loop over the section numbers) and single.
//
// Every thread of a job-wide team meets the same work-sharing constructs in
// the same order (OpenMP requires it), so each counts them, and construct k
// owns slot k % slots of a ring on process 0. A slot is two words, each
// with the generation of a construct (k mod 2^24) in its top 24 bits:
//  - the claim word: in its low 40 bits the next unclaimed iteration; a
//    thread claims a chunk by remote compare-and-swap, and the first thread
//    to meet construct k resets a word still holding an older generation;
//  - the finished word: in its low 40 bits how many of the team's threads
//    are done with that construct (no chunk left for them, or their single
//    decided). A thread may reset the claim word only once every thread is
//    done with the construct it holds, so a chain of nowait constructs of
//    any length makes a thread that runs `slots` constructs ahead wait for
//    the slowest, instead of taking its slot.
// Static schedules need no slot: each thread computes its own iterations.
//
// `for ordered`: chunks run their ordered regions in iteration order. As in
// libgomp, a chunk is the unit: the thread that runs a chunk holds the
// turn from its first ordered region (or its chunk's end, if it runs none)
// until it asks for its next chunk, and then passes it to the chunk that
// follows. The turn is one word after the ring: in its top 24 bits the
// ordered loops the job has finished (mod 2^24), in its low 40 bits the
// first iteration of the chunk whose turn it is. A region's writes reach
// the next chunk's thread through a flush at each end of it.
#include <limits>

#include "rdmx/core/backoff.hpp"
#include "rdmx/fabric/rma.hpp"
#include "runtime.hpp"

namespace rdmx::omp {

namespace {
constexpr std::uint64_t next_bits = 40;
constexpr std::uint64_t next_mask = (std::uint64_t{1} << next_bits) - 1;
constexpr std::uint32_t generation_mask = 0xffffff;

std::uint32_t generation(std::uint64_t construct) { return static_cast<std::uint32_t>(construct) & generation_mask; }
std::uint64_t pack(std::uint32_t gen, std::uint64_t next) { return std::uint64_t{gen} << next_bits | next; }

std::uint64_t iteration_count(const LoopSpec& s) {
  if (s.incr == 0) fatal("a loop with increment 0");
  __int128 span, step;
  if (s.ull) {
    const auto start = static_cast<unsigned long long>(s.start), end = static_cast<unsigned long long>(s.end),
               incr = static_cast<unsigned long long>(s.incr);
    span = s.up ? __int128{end} - start : __int128{start} - end;
    step = s.up ? __int128{incr} : __int128{0ULL - incr};
  } else {
    span = s.incr > 0 ? __int128{s.end} - s.start : __int128{s.start} - s.end;
    step = s.incr > 0 ? s.incr : -__int128{s.incr};
  }
  if (span <= 0) return 0;
  return static_cast<std::uint64_t>((span + step - 1) / step);
}

std::uint32_t generation_of(std::uint64_t word) { return static_cast<std::uint32_t>(word >> next_bits); }

RemoteLocator word_of(std::uint64_t construct) {
  const Runtime& rt = *runtime();
  return rt.ring.slice((construct % rt.slots) * 16, 8);
}
RemoteLocator finished_word_of(std::uint64_t construct) {
  const Runtime& rt = *runtime();
  return rt.ring.slice((construct % rt.slots) * 16 + 8, 8);
}

// Waits until every thread of the team is done with construct generation
// `held` of this slot (a thread that ran `slots` constructs ahead), or until
// the slot has moved past it (another waiter took it meanwhile, and a
// thread has already finished the newer construct: the caller reads the
// claim word again).
void wait_until_finished(std::uint64_t construct, std::uint32_t held) {
  const RemoteLocator finished = finished_word_of(construct);
  const std::uint32_t gen = generation(construct);
  const std::uint32_t held_behind = (gen - held) & generation_mask;
  Backoff backoff;
  for (;;) {
    const std::uint64_t f = fetch_add(finished, 0).get();
    const std::uint32_t done = generation_of(f);
    if (done == held ? (f & next_mask) >= team.size : ((gen - done) & generation_mask) < held_behind) return;
    backoff(false);
  }
}

// The claim word of the current construct, reset to it if it still holds
// an older one that every thread is done with. Returns its value.
std::uint64_t current_word(const RemoteLocator& word, Loop& loop, const char* what) {
  const std::uint32_t gen = generation(loop.construct);
  std::uint64_t w = loop.guessed ? loop.guess : fetch_add(word, 0).get();
  for (;;) {
    const std::uint32_t held = generation_of(w);
    const std::uint32_t behind = (gen - held) & generation_mask;
    if (behind == 0) return w;
    // Nobody resets a slot before this thread is done with it, so a newer
    // generation here means the team's threads disagree on the constructs.
    if (behind > generation_mask / 2)
      fatal("%s: another thread is %u work-sharing constructs ahead of this one in the same slot: the team's "
            "threads did not all meet the same constructs",
            what, (held - gen) & generation_mask);
    wait_until_finished(loop.construct, held);
    const std::uint64_t fresh = pack(gen, 0);
    const std::uint64_t seen = compare_swap(word, w, fresh).get();
    w = seen == w ? fresh : seen;
  }
}

// This thread is done with the current construct: one more in its slot's
// finished word. The first to finish moves the word to this construct's
// generation, keeping the counts that others added meanwhile.
void finish(const Loop& loop) {
  const RemoteLocator finished = finished_word_of(loop.construct);
  const std::uint32_t gen = generation(loop.construct);
  const std::uint64_t before = fetch_add(finished, 1).get();
  if (generation_of(before) == gen) return;
  // The word held the previous construct of the slot, which every thread
  // had finished (team.size): only the thread that found exactly that many
  // carries the surplus over to this generation.
  if ((before & next_mask) != team.size) return;
  std::uint64_t f = before + 1;
  for (;;) {
    const std::uint64_t moved = pack(gen, (f & next_mask) - team.size);
    const std::uint64_t seen = compare_swap(finished, f, moved).get();
    if (seen == f) return;
    f = seen;
  }
}

// The turn of ordered loops (see the top): its word, and waiting for and
// passing this thread's turn for its current chunk.
RemoteLocator turn_word() {
  const Runtime& rt = *runtime();
  return rt.ring.slice(std::uint64_t{rt.slots} * 16, 8);
}
std::uint64_t turn_of(std::uint64_t ordinal, std::uint64_t iteration) {
  return pack(generation(ordinal - 1), iteration);
}
void wait_turn(const Loop& loop, std::uint64_t iteration) {
  const RemoteLocator word = turn_word();
  const std::uint64_t mine = turn_of(loop.ordinal, iteration);
  Backoff backoff;
  while (fetch_add(word, 0).get() != mine) backoff(false);
}
// Only the turn's holder writes the word: a swap that finds another value
// means the team's threads disagree on the loops.
void pass_turn(Loop& loop) {
  if (!loop.has_turn) wait_turn(loop, loop.first);
  const std::uint64_t mine = turn_of(loop.ordinal, loop.first);
  const std::uint64_t next =
      loop.last == loop.iterations ? turn_of(loop.ordinal + 1, 0) : turn_of(loop.ordinal, loop.last);
  if (compare_swap(turn_word(), mine, next).get() != mine)
    fatal("for ordered: the turn moved while this thread held it: the team's threads did not all meet the same "
          "ordered loops");
  loop.in_chunk = false;
  loop.has_turn = false;
}

// The loop's values of iterations [first, last), as the compiler's types:
// for unsigned long long, arithmetic modulo 2^64 steps down as well as up.
void bounds(const Loop& loop, std::uint64_t first, std::uint64_t last, long* istart, long* iend) {
  const LoopSpec& s = loop.spec;
  *istart = static_cast<long>(s.start + static_cast<__int128>(first) * s.incr);
  *iend = last == loop.iterations ? s.end : static_cast<long>(s.start + static_cast<__int128>(last) * s.incr);
}
void bounds(const Loop& loop, std::uint64_t first, std::uint64_t last, unsigned long long* istart,
            unsigned long long* iend) {
  const auto start = static_cast<unsigned long long>(loop.spec.start), incr = static_cast<unsigned long long>(loop.spec.incr);
  *istart = start + first * incr;
  *iend = last == loop.iterations ? static_cast<unsigned long long>(loop.spec.end) : start + last * incr;
}

// Chunk size for a claim that finds `next` of `n` iterations handed out.
std::uint64_t chunk_size(const Loop& loop, std::uint64_t next, std::uint32_t threads) {
  const std::uint64_t left = loop.iterations - next;
  const std::uint64_t chunk = loop.spec.chunk > 0 ? static_cast<std::uint64_t>(loop.spec.chunk) : 1;
  std::uint64_t q = chunk;
  if (loop.spec.schedule == Schedule::guided) q = std::max(chunk, (left + threads - 1) / threads);
  return std::min(q, left);
}
}  // namespace

void start_loop(const LoopSpec& spec, bool ordered) {
  Loop& loop = team.loop;
  loop = Loop{};
  loop.spec = spec;
  if (loop.spec.schedule == Schedule::none) loop.spec.schedule = Schedule::fixed;
  loop.iterations = iteration_count(spec);
  if (loop.iterations > next_mask) fatal("a loop of %llu iterations: at most 2^40", (unsigned long long)loop.iterations);
  if (!team.shared) return;  // one thread: its chunks come in order
  loop.construct = ++team.constructs;
  if (!ordered) return;
  loop.ordered = true;
  loop.ordinal = ++team.ordered_loops;
  // A loop without iterations has no chunk to pass the turn on: thread 0
  // passes it to the next loop once the previous one is done.
  if (loop.iterations == 0 && team.num == 0) {
    loop.in_chunk = true;
    pass_turn(loop);
  }
}

// Every thread of the last region finished each slot's construct: a slot's
// finished word then counts the new team as done with it, keeping its
// generation (the claim word's). Process 0 holds the ring; nothing else
// touches it between regions.
void size_work_shares(std::uint32_t size) {
  Runtime& rt = *runtime();
  if (rt.ring_team == size) return;
  auto* words = reinterpret_cast<std::uint64_t*>(resolve(rt.ring).address);
  for (std::uint32_t i = 0; i < rt.slots; ++i) {
    const std::uint64_t claim = std::atomic_ref<std::uint64_t>(words[2 * i]).load(std::memory_order_acquire);
    std::atomic_ref<std::uint64_t>(words[2 * i + 1]).store(pack(generation_of(claim), size), std::memory_order_release);
  }
  rt.ring_team = size;
}

namespace {
// This thread's next iterations [first, last) of the current loop.
bool claim_range(std::uint64_t* first_out, std::uint64_t* last_out);

bool next_range(std::uint64_t* first_out, std::uint64_t* last_out) {
  Loop& loop = team.loop;
  if (!loop.ordered) return claim_range(first_out, last_out);
  if (loop.in_chunk) pass_turn(loop);
  if (!claim_range(first_out, last_out)) return false;
  loop.first = *first_out;
  loop.last = *last_out;
  loop.in_chunk = true;
  return true;
}

bool claim_range(std::uint64_t* first_out, std::uint64_t* last_out) {
  Loop& loop = team.loop;
  const std::uint32_t threads = team.size;
  if (loop.spec.schedule == Schedule::fixed) {
    // OpenMP's static: without a chunk one contiguous block per thread,
    // with one chunks dealt round-robin.
    std::uint64_t first, last;
    if (loop.spec.chunk <= 0) {
      if (loop.taken++ > 0) return false;
      const std::uint64_t q = loop.iterations / threads, r = loop.iterations % threads;
      first = team.num * q + std::min<std::uint64_t>(team.num, r);
      last = first + q + (team.num < r ? 1 : 0);
    } else {
      const auto chunk = static_cast<std::uint64_t>(loop.spec.chunk);
      const unsigned __int128 index = static_cast<unsigned __int128>(loop.taken++) * threads + team.num;
      if (index * chunk >= loop.iterations) return false;
      first = static_cast<std::uint64_t>(index * chunk);
      last = std::min(loop.iterations, first + chunk);
    }
    if (first >= last) return false;
    *first_out = first;
    *last_out = last;
    return true;
  }
  if (!team.shared) {
    const std::uint64_t q = loop.taken < loop.iterations ? chunk_size(loop, loop.taken, 1) : 0;
    if (q == 0) return false;
    *first_out = loop.taken;
    *last_out = loop.taken + q;
    loop.taken += q;
    return true;
  }
  const RemoteLocator word = word_of(loop.construct);
  std::uint64_t w = current_word(word, loop, "a loop");
  for (;;) {
    const std::uint64_t next = w & next_mask;
    if (next >= loop.iterations) {
      loop.guess = w;
      loop.guessed = true;
      if (!loop.finished) finish(loop);
      loop.finished = true;
      return false;
    }
    const std::uint64_t q = chunk_size(loop, next, threads);
    const std::uint64_t desired = pack(generation(loop.construct), next + q);
    const std::uint64_t seen = compare_swap(word, w, desired).get();
    if (seen == w) {
      loop.guess = desired;
      loop.guessed = true;
      *first_out = next;
      *last_out = next + q;
      return true;
    }
    loop.guess = seen;
    loop.guessed = true;
    w = current_word(word, loop, "a loop");
  }
}
}  // namespace

bool next_chunk(long* istart, long* iend) {
  std::uint64_t first, last;
  if (!next_range(&first, &last)) return false;
  bounds(team.loop, first, last, istart, iend);
  return true;
}

bool next_chunk_ull(unsigned long long* istart, unsigned long long* iend) {
  std::uint64_t first, last;
  if (!next_range(&first, &last)) return false;
  bounds(team.loop, first, last, istart, iend);
  return true;
}

bool single() {
  if (!team.shared) return true;
  Loop& loop = team.loop;
  loop = Loop{};
  loop.construct = ++team.constructs;
  // The first thread to move the claim word to this construct runs it.
  const RemoteLocator word = word_of(loop.construct);
  const std::uint32_t gen = generation(loop.construct);
  std::uint64_t w = fetch_add(word, 0).get();
  bool mine = false;
  for (;;) {
    const std::uint32_t held = generation_of(w);
    const std::uint32_t behind = (gen - held) & generation_mask;
    if (behind == 0) break;  // another thread took it
    if (behind > generation_mask / 2)
      fatal("single: another thread is %u work-sharing constructs ahead of this one in the same slot: the team's "
            "threads did not all meet the same constructs",
            (held - gen) & generation_mask);
    wait_until_finished(loop.construct, held);
    const std::uint64_t seen = compare_swap(word, w, pack(gen, 1)).get();
    if (seen == w) {
      mine = true;
      break;
    }
    w = seen;
  }
  finish(loop);
  return mine;
}

}  // namespace rdmx::omp

using namespace rdmx::omp;

namespace {
LoopSpec spec(Schedule schedule, long start, long end, long incr, long chunk) {
  return LoopSpec{schedule, start, end, incr, chunk};
}
LoopSpec runtime_spec(long start, long end, long incr) {
  LoopSpec s = require("schedule(runtime)").runtime_schedule;
  s.start = start;
  s.end = end;
  s.incr = incr;
  return s;
}
bool start(const LoopSpec& s, long* istart, long* iend) {
  start_loop(s);
  return next_chunk(istart, iend);
}
// The bits of unsigned bounds travel in LoopSpec's longs.
LoopSpec ull_spec(Schedule schedule, bool up, unsigned long long start, unsigned long long end,
                  unsigned long long incr, unsigned long long chunk) {
  if (chunk > static_cast<unsigned long long>(std::numeric_limits<long>::max()))
    fatal("a loop over unsigned long long with chunk %llu: at most %ld", chunk, std::numeric_limits<long>::max());
  LoopSpec s{schedule, static_cast<long>(start), static_cast<long>(end), static_cast<long>(incr), static_cast<long>(chunk)};
  s.ull = true;
  s.up = up;
  return s;
}
LoopSpec ull_runtime_spec(bool up, unsigned long long start, unsigned long long end, unsigned long long incr) {
  LoopSpec s = runtime_spec(static_cast<long>(start), static_cast<long>(end), static_cast<long>(incr));
  s.ull = true;
  s.up = up;
  return s;
}
bool start_ull(const LoopSpec& s, unsigned long long* istart, unsigned long long* iend) {
  start_loop(s);
  return next_chunk_ull(istart, iend);
}
}  // namespace

extern "C" {

// The schedules GCC names in its entry points, and what each hands out.
#define RDMX_OMP_SCHEDULES(X)         \
  X(static, Schedule::fixed)          \
  X(dynamic, Schedule::dynamic)       \
  X(guided, Schedule::guided)         \
  X(nonmonotonic_dynamic, Schedule::dynamic) \
  X(nonmonotonic_guided, Schedule::guided)
#define RDMX_OMP_RUNTIME_SCHEDULES(X) X(runtime) X(nonmonotonic_runtime) X(maybe_nonmonotonic_runtime)

#define RDMX_OMP_LOOP(name, schedule)                                                               \
  bool GOMP_loop_##name##_start(long start_, long end, long incr, long chunk, long* istart, long* iend) { \
    return start(spec(schedule, start_, end, incr, chunk), istart, iend);                           \
  }                                                                                                 \
  bool GOMP_loop_##name##_next(long* istart, long* iend) { return next_chunk(istart, iend); }       \
  void GOMP_parallel_loop_##name(void (*fn)(void*), void* data, unsigned num_threads, long start_, long end, \
                                 long incr, long chunk, unsigned) {                                 \
    parallel(fn, data, num_threads, spec(schedule, start_, end, incr, chunk));                      \
  }
RDMX_OMP_SCHEDULES(RDMX_OMP_LOOP)
#undef RDMX_OMP_LOOP

#define RDMX_OMP_RUNTIME_LOOP(name)                                                                 \
  bool GOMP_loop_##name##_start(long start_, long end, long incr, long* istart, long* iend) {       \
    return start(runtime_spec(start_, end, incr), istart, iend);                                    \
  }                                                                                                 \
  bool GOMP_loop_##name##_next(long* istart, long* iend) { return next_chunk(istart, iend); }       \
  void GOMP_parallel_loop_##name(void (*fn)(void*), void* data, unsigned num_threads, long start_, long end, \
                                 long incr, unsigned) {                                             \
    parallel(fn, data, num_threads, runtime_spec(start_, end, incr));                               \
  }
RDMX_OMP_RUNTIME_SCHEDULES(RDMX_OMP_RUNTIME_LOOP)
#undef RDMX_OMP_RUNTIME_LOOP

// Loops over unsigned long long: GCC passes the direction, and calls these
// inside a plain GOMP_parallel (there is no combined form).
#define RDMX_OMP_ULL_LOOP(name, schedule)                                                           \
  bool GOMP_loop_ull_##name##_start(bool up, unsigned long long start_, unsigned long long end,     \
                                    unsigned long long incr, unsigned long long chunk,              \
                                    unsigned long long* istart, unsigned long long* iend) {         \
    return start_ull(ull_spec(schedule, up, start_, end, incr, chunk), istart, iend);               \
  }                                                                                                 \
  bool GOMP_loop_ull_##name##_next(unsigned long long* istart, unsigned long long* iend) {          \
    return next_chunk_ull(istart, iend);                                                            \
  }
RDMX_OMP_SCHEDULES(RDMX_OMP_ULL_LOOP)
#undef RDMX_OMP_ULL_LOOP

#define RDMX_OMP_ULL_RUNTIME_LOOP(name)                                                             \
  bool GOMP_loop_ull_##name##_start(bool up, unsigned long long start_, unsigned long long end,     \
                                    unsigned long long incr, unsigned long long* istart,            \
                                    unsigned long long* iend) {                                     \
    return start_ull(ull_runtime_spec(up, start_, end, incr), istart, iend);                       \
  }                                                                                                 \
  bool GOMP_loop_ull_##name##_next(unsigned long long* istart, unsigned long long* iend) {          \
    return next_chunk_ull(istart, iend);                                                            \
  }
RDMX_OMP_RUNTIME_SCHEDULES(RDMX_OMP_ULL_RUNTIME_LOOP)
#undef RDMX_OMP_ULL_RUNTIME_LOOP
#undef RDMX_OMP_RUNTIME_SCHEDULES
#undef RDMX_OMP_SCHEDULES

// `for ordered`: the same schedules; the ordered region of a chunk waits
// for its turn and flushes at both ends (see the top).
#define RDMX_OMP_ORDERED_LOOP(name, schedule)                                                       \
  bool GOMP_loop_ordered_##name##_start(long start_, long end, long incr, long chunk, long* istart,  \
                                        long* iend) {                                               \
    start_loop(spec(schedule, start_, end, incr, chunk), true);                                     \
    return next_chunk(istart, iend);                                                                \
  }                                                                                                 \
  bool GOMP_loop_ordered_##name##_next(long* istart, long* iend) { return next_chunk(istart, iend); } \
  bool GOMP_loop_ull_ordered_##name##_start(bool up, unsigned long long start_, unsigned long long end, \
                                            unsigned long long incr, unsigned long long chunk,      \
                                            unsigned long long* istart, unsigned long long* iend) { \
    start_loop(ull_spec(schedule, up, start_, end, incr, chunk), true);                             \
    return next_chunk_ull(istart, iend);                                                            \
  }                                                                                                 \
  bool GOMP_loop_ull_ordered_##name##_next(unsigned long long* istart, unsigned long long* iend) {   \
    return next_chunk_ull(istart, iend);                                                            \
  }
RDMX_OMP_ORDERED_LOOP(static, Schedule::fixed)
RDMX_OMP_ORDERED_LOOP(dynamic, Schedule::dynamic)
RDMX_OMP_ORDERED_LOOP(guided, Schedule::guided)
#undef RDMX_OMP_ORDERED_LOOP

bool GOMP_loop_ordered_runtime_start(long start_, long end, long incr, long* istart, long* iend) {
  start_loop(runtime_spec(start_, end, incr), true);
  return next_chunk(istart, iend);
}
bool GOMP_loop_ordered_runtime_next(long* istart, long* iend) { return next_chunk(istart, iend); }
bool GOMP_loop_ull_ordered_runtime_start(bool up, unsigned long long start_, unsigned long long end,
                                         unsigned long long incr, unsigned long long* istart,
                                         unsigned long long* iend) {
  start_loop(ull_runtime_spec(up, start_, end, incr), true);
  return next_chunk_ull(istart, iend);
}
bool GOMP_loop_ull_ordered_runtime_next(unsigned long long* istart, unsigned long long* iend) {
  return next_chunk_ull(istart, iend);
}

void GOMP_ordered_start() {
  Loop& loop = team.loop;
  if (!loop.ordered || !loop.in_chunk || loop.has_turn) return;
  wait_turn(loop, loop.first);
  loop.has_turn = true;
  rdmx_omp_flush();  // acquires what the previous chunks' ordered regions wrote
}
void GOMP_ordered_end() {
  if (team.loop.ordered) rdmx_omp_flush();  // releases this region's writes before the turn passes
}

void GOMP_loop_end() { team_barrier(); }
void GOMP_loop_end_nowait() {}

// Section k of `count` is iteration k of [1, count + 1); 0 means none left.
unsigned GOMP_sections_next() {
  long first, last;
  return next_chunk(&first, &last) ? static_cast<unsigned>(first) : 0;
}
unsigned GOMP_sections_start(unsigned count) {
  start_loop(spec(Schedule::dynamic, 1, long{count} + 1, 1, 1));
  return GOMP_sections_next();
}
void GOMP_parallel_sections(void (*fn)(void*), void* data, unsigned num_threads, unsigned count, unsigned) {
  parallel(fn, data, num_threads, spec(Schedule::dynamic, 1, long{count} + 1, 1, 1));
}
void GOMP_sections_end() { team_barrier(); }
void GOMP_sections_end_nowait() {}

bool GOMP_single_start() { return single(); }

// single copyprivate: the thread that runs the single hands the others the
// address of a record on its stack, pointing at its variables there. The
// master's stack lies in the shared heap, every other thread's in its
// process's own memory: so the master always runs it (OpenMP lets any one
// thread), publishes the record in the Region and meets the others at a
// team barrier, after which they read its values (GCC then puts a barrier
// before the master's stack moves on).
void* GOMP_single_copy_start() {
  if (!team.shared) return nullptr;
  ++team.constructs;  // a work-sharing construct, counted alike on every thread
  if (team.num == 0) return nullptr;
  team_barrier();
  return runtime()->region->copyprivate;
}
void GOMP_single_copy_end(void* data) {
  if (!team.shared) return;
  runtime()->region->copyprivate = data;
  team_barrier();
}

}  // extern "C"
