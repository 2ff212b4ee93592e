// The MCTS framework under the launcher: every parallelism, every way calls
// travel, over shared memory and TCP. Process 0's thread 0 drives (asserts);
// every other thread of the job serves the search.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "mcts/hex.hpp"
#include "mcts/search.hpp"

using namespace rdmx;
using namespace rdmx::mcts;

namespace {

Hex position(int size, const std::string& black, const std::string& white, Player to_move) {
  Hex h(size);
  auto put = [&](const std::string& cells, Player p) {
    std::istringstream in(cells);
    for (std::string c; in >> c;) {
      const auto m = h.parse_move(c);
      if (!m) throw std::invalid_argument("bad cell " + c);
      h.place(*m, p);
    }
  };
  put(black, Hex::black);
  put(white, Hex::white);
  h.set_to_move(to_move);
  return h;
}

// Runs driver(engine) on process 0's thread 0 while every thread serves.
template <class Driver>
void with_engine(SearchOptions options, Driver&& driver) {
  Engine<Hex> engine(options);
  Job::current().run([&](ThreadId me) { engine.run(me, [&] { driver(engine); }); });
}

struct Variant {
  const char* name;
  SearchOptions options;
};

std::vector<Variant> variants() {
  std::vector<Variant> v;
  SearchOptions o;
  o.phase = 256;  // several phases even in short searches
  v.push_back({"tree/trad", o});
  o.aggregation = Aggregation::ovfl;
  v.push_back({"tree/ovfl", o});
  o.aggregation = Aggregation::trad;
  o.local_calls = true;
  v.push_back({"tree/local-calls", o});
  o.local_calls = false;
  o.hash_owner = true;
  v.push_back({"tree/hash-owner", o});
  o.hash_owner = false;
  // The window of rollouts in flight at both ends: one per thread with no
  // floor, and a floor far above the threads' share.
  o.inflight = 1;
  o.inflight_floor = 0;
  v.push_back({"tree/one-in-flight-per-thread", o});
  o.inflight_floor = 256;
  v.push_back({"tree/256-in-flight", o});
  o.inflight = SearchOptions{}.inflight;
  o.inflight_floor = SearchOptions{}.inflight_floor;
  for (Parallelism p : {Parallelism::leaf, Parallelism::root, Parallelism::sequential}) {
    o.parallelism = p;
    v.push_back({to_string(p), o});
  }
  return v;
}

bool is_win_for_mover(const Hex& h, Hex::Move m) {
  Hex after = h;
  after.play(m);
  return after.terminal() && after.winner() == h.to_move();
}

}  // namespace

// Every rollout comes home exactly once: it created one node or ended on a
// finished game, and the root's statistics hold all its playouts. A call lost
// or run twice anywhere in the job breaks one of these equalities.
TEST(Search, EveryRolloutComesHomeOnce) {
  const std::uint32_t n = Job::current().total_threads();
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    with_engine(v.options, [&](Engine<Hex>& engine) {
      for (int size : {3, 5}) {  // the engine is reusable; on 3x3 the tree reaches finished games
        const auto r = engine.search(Hex(size), Budget{3000, 0});
        std::uint64_t expected = 3000;
        if (v.options.parallelism == Parallelism::root) expected = (3000 + n - 1) / n * n;
        EXPECT_EQ(r.rollouts, expected);
        EXPECT_EQ(r.nodes + r.terminals, r.rollouts);
        if (size == 3) EXPECT_GT(r.terminals, 0u);
        std::uint64_t visits = 0, wins = 0;
        for (const auto& m : r.moves) {
          visits += m.visits;
          wins += m.wins;
          EXPECT_LE(m.wins, m.visits);
        }
        EXPECT_EQ(visits, r.rollouts * v.options.playouts);
        EXPECT_GT(wins, 0u);
        EXPECT_GE(r.visits, r.rollouts);
        if (v.options.parallelism == Parallelism::tree) {
          // The window: inflight per thread of the job, at least the floor.
          const std::uint64_t window = std::max<std::uint64_t>(std::uint64_t{v.options.inflight} * n, v.options.inflight_floor);
          EXPECT_GE(r.peak_in_flight, 1u);
          EXPECT_LE(r.peak_in_flight, window);
        }
        const bool calls = Job::current().size() > 1 || (v.options.local_calls && n > 1);
        if (v.options.parallelism == Parallelism::tree && calls) EXPECT_GT(r.remote_calls, 0u);
        if (v.options.parallelism != Parallelism::tree) EXPECT_EQ(r.deferred, 0u);
        // The per-rollout costs (docs/mcts.md): calls that leave the
        // process are counted with what they carry, at least a node's
        // address each; a one-process job and the sequential search send none.
        EXPECT_LE(r.process_calls, r.remote_calls);
        EXPECT_GE(r.call_bytes, r.process_calls * sizeof(NodeRef<Hex>));
        const bool spread = v.options.parallelism == Parallelism::tree || v.options.parallelism == Parallelism::leaf;
        if (Job::current().size() > 1 && spread) EXPECT_GT(r.process_calls, 0u);
        if (Job::current().size() == 1 || v.options.parallelism == Parallelism::sequential) {
          EXPECT_EQ(r.process_calls, 0u);
          EXPECT_EQ(r.call_bytes, 0u);
        }
      }
    });
  }
}

TEST(Search, TimeBudgetStopsTheSearch) {
  with_engine({}, [&](Engine<Hex>& engine) {
    const auto r = engine.search(Hex(11), Budget{0, 0.3});
    EXPECT_GE(r.seconds, 0.3);
    // The search stops: bounded, with room for a machine busy with other
    // work (a sanitizer build beside other tests), not a speed check.
    EXPECT_LT(r.seconds, 60.0);
    EXPECT_GT(r.rollouts, 0u);
    EXPECT_EQ(r.nodes + r.terminals, r.rollouts);
    // Many short searches: the stop races with threads starting rollouts
    // (a starter that passed its check before the stop once slipped through).
    for (int i = 0; i < 50; ++i) {
      const auto s = engine.search(Hex(7), Budget{0, 0.01});
      ASSERT_EQ(s.nodes + s.terminals, s.rollouts) << "search " << i;
    }
  });
}

// Tactics: take a one-move win; block the opponent's only winning cell.
TEST(Search, FindsWinsAndBlocks) {
  struct Case {
    Hex position;
    std::string answer;  // empty: any winning move
  };
  const std::vector<Case> cases = {
      // black c1..c4: b5 and c5 both win
      {position(5, "c1 c2 c3 c4", "a1 a2 e4 e5", Hex::black), ""},
      // white a3..d3 on 5x5: e3 and e2 win (neighbours of d3 on the right edge)
      {position(5, "b1 c2 b4 c5 d5", "a3 b3 c3 d3", Hex::white), ""},
      // black c1..c4 and white holds b5: white must take c5
      {position(5, "c1 c2 c3 c4", "b5 a1 e1", Hex::white), "c5"},
      // white b4..g4 on 7x7 with black on a5: black must take a4... or lose
      {position(7, "a5 c1 d2 e6 f1 g7 b7", "b4 c4 d4 e4 f4 g4", Hex::black), "a4"},
  };
  for (Parallelism p : {Parallelism::tree, Parallelism::sequential}) {
    SearchOptions o;
    o.parallelism = p;
    with_engine(o, [&](Engine<Hex>& engine) {
      for (const Case& c : cases) {
        SCOPED_TRACE(c.position.board_text());
        const auto r = engine.search(c.position, Budget{4000, 0});
        if (c.answer.empty()) EXPECT_TRUE(is_win_for_mover(c.position, r.best)) << c.position.move_name(r.best);
        else EXPECT_EQ(c.position.move_name(r.best), c.answer);
      }
    });
  }
}

// A small match against a player that moves at random: the search wins every game, as either colour.
TEST(Search, BeatsARandomPlayerEveryGame) {
  with_engine({}, [&](Engine<Hex>& engine) {
    Rng rng(7);
    for (int game = 0; game < 8; ++game) {
      const Player mcts = static_cast<Player>(game % 2);
      Hex h(5);
      Hex::Move moves[Hex::max_moves];
      while (!h.terminal()) {
        if (h.to_move() == mcts) {
          h.play(engine.search(h, Budget{400, 0}).best);
        } else {
          const std::size_t k = h.legal_moves(moves);
          h.play(moves[rng.below(static_cast<std::uint32_t>(k))]);
        }
      }
      EXPECT_EQ(h.winner(), mcts) << "game " << game << "\n" << h.board_text();
    }
  });
}

TEST(Search, RejectsBadInput) {
  SearchOptions zero;
  zero.playouts = 0;
  EXPECT_THROW(Engine<Hex>{zero}, std::invalid_argument);
  with_engine({}, [&](Engine<Hex>& engine) {
    EXPECT_THROW(engine.search(Hex(5), Budget{}), std::invalid_argument);  // no budget
    const Hex over = position(3, "a1 a2 a3", "b1 b2", Hex::white);
    ASSERT_TRUE(over.terminal());
    EXPECT_THROW(engine.search(over, Budget{100, 0}), std::invalid_argument);
  });
  Engine<Hex> idle({});
  EXPECT_THROW(idle.search(Hex(5), Budget{100, 0}), std::logic_error);  // not inside run()
}
