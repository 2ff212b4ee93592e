// 08_mcts_game: a game of your own, searched by the distributed MCTS.
//   scripts/run --tls shm -np 2 build/apps/examples/rdmx-example-08-mcts-game --rdmx-threads=2
// apps/mcts searches any type that satisfies rdmx::mcts::Game (game.hpp): the
// rules only, no communication or tree code. Here, Nim: three piles of
// stones; a move takes one or more stones from one pile; whoever takes the
// last stone wins. Its theory is known (a position is lost for the player
// to move exactly when the piles' XOR is 0), so the search can be checked.
#include <array>
#include <cstdio>
#include <exception>
#include <span>

#include "mcts/game.hpp"
#include "mcts/search.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/fabric/job.hpp"

// A state is copied between threads and processes as plain bytes: no
// pointers, no heap, trivially copyable.
struct Nim {
  struct Move {
    std::uint8_t pile, take;
    friend bool operator==(const Move&, const Move&) = default;
  };
  static constexpr std::size_t piles = 3, max_pile = 7, max_moves = piles * max_pile;
  std::array<std::uint8_t, piles> heap{};
  rdmx::mcts::Player mover = 0;

  rdmx::mcts::Player to_move() const { return mover; }
  std::size_t legal_moves(std::span<Move> out) const {
    std::size_t n = 0;
    for (std::uint8_t p = 0; p < piles; ++p)
      for (std::uint8_t t = 1; t <= heap[p]; ++t) out[n++] = {p, t};
    return n;
  }
  void play(Move m) {
    heap[m.pile] -= m.take;
    mover = rdmx::mcts::other(mover);
  }
  bool terminal() const { return heap[0] + heap[1] + heap[2] == 0; }
  rdmx::mcts::Player winner() const { return rdmx::mcts::other(mover); }  // who took the last stone
  std::uint64_t hash() const {  // a position's bits, mixed (splitmix64's finalizer)
    std::uint64_t z = heap[0] | heap[1] << 8 | heap[2] << 16 | std::uint64_t{mover} << 24;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  rdmx::mcts::Player playout(rdmx::mcts::Rng& rng) const {
    Nim s = *this;
    std::array<Move, max_moves> moves;
    while (!s.terminal()) s.play(moves[rng.below(static_cast<std::uint32_t>(s.legal_moves(moves)))]);
    return s.winner();
  }
};
static_assert(rdmx::mcts::Game<Nim>);

int main(int argc, char** argv) {
  try {
    rdmx::Job job(argc, argv);
    // One Engine per process, before Job::run; every worker thread of the
    // job then serves the search, and thread {0, 0} drives it.
    rdmx::mcts::Engine<Nim> engine(rdmx::mcts::SearchOptions{});
    // 2 ^ 3 ^ 4 = 5: won only by taking 3 from the last pile (leaving 2 ^ 3 ^ 1 = 0).
    // Small enough that 20000 rollouts reach the ends of the game: random
    // playouts say little about Nim, so larger piles need far longer searches.
    const Nim start{{2, 3, 4}, 0};
    rdmx::mcts::SearchResult<Nim> result;
    job.run([&](rdmx::ThreadId me) {
      engine.run(me, [&] { result = engine.search(start, rdmx::mcts::Budget{20000, 0}); });
    });
    if (job.rank() != 0) return 0;  // the result is the driver's

    Nim after = start;
    after.play(result.best);
    const bool winning = (after.heap[0] ^ after.heap[1] ^ after.heap[2]) == 0;
    std::printf("08_mcts_game: %llu rollouts on %u threads; best move: take %u from pile %u (%s), win rate %.2f\n",
                static_cast<unsigned long long>(result.rollouts), job.total_threads(), result.best.take,
                result.best.pile, winning ? "winning" : "LOSING", result.win_rate);
    if (!winning || result.rollouts != 20000 || result.nodes + result.terminals != result.rollouts) {
      std::fprintf(stderr, "08_mcts_game: %s\n", winning ? "the search lost rollouts" : "the search missed the winning move");
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {  // an rdmx::Error, or the engine refusing its options
    std::fprintf(stderr, "08_mcts_game: %s\n", e.what());
    return 1;
  }
}
