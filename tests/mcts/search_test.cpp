// The MCTS framework under the launcher: every parallelism, every way calls
// travel, over shared memory and TCP. Process 0's thread 0 drives (asserts);
// every other thread of the job serves the search.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

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
  std::uint8_t knowledge = 0;  // the Hex playouts' (the position carries it)
};

// What rdmx-hex plays with: Hex's playout knowledge, RAVE and priors.
SearchOptions with_knowledge(SearchOptions o) {
  o.rave = true;
  o.prior_games = 32;
  o.c = 0.3;
  return o;
}

std::vector<Variant> variants() {
  std::vector<Variant> v;
  SearchOptions o;
  o.phase = 256;  // several phases even in short searches
  o.audit = true;
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
  o.spread_depth = SearchOptions::no_spread_limit;  // every node on any thread (the seed's)
  v.push_back({"tree/spread-everywhere", o});
  o.spread_depth = SearchOptions{}.spread_depth;
  o.rings_over_tcp = true;  // over TCP, every call through the aggregator's rings
  v.push_back({"tree/rings-over-tcp", o});
  o.rings_over_tcp = false;
  // The window of rollouts in flight at both ends: one per thread with no
  // floor, and a floor far above the threads' share.
  o.inflight = 1;
  o.inflight_floor = 0;
  v.push_back({"tree/one-in-flight-per-thread", o});
  o.inflight_floor = 256;
  v.push_back({"tree/256-in-flight", o});
  o.inflight = SearchOptions{}.inflight;
  o.inflight_floor = SearchOptions{}.inflight_floor;
  o.virtual_loss = 0;
  v.push_back({"tree/no-virtual-loss", o});
  o.virtual_loss = 3;
  v.push_back({"tree/virtual-loss-3", o});
  o.virtual_loss = 1;
  // The framework's knowledge: RAVE statistics travel with the rollouts
  // between threads and processes; priors change only the selection.
  SearchOptions k = o;
  k.rave = true;
  v.push_back({"tree/rave", k});
  k.aggregation = Aggregation::ovfl;
  k.local_calls = true;
  v.push_back({"tree/rave/ovfl/local-calls", k});
  // AMAF batches at every node (the places taken over again and again),
  // and leaves simulated by any thread of their process (the seed's way).
  k = o;
  k.rave = true;
  k.amaf_batch_from = 0;
  k.amaf_batch = 4;
  k.spread_leaves = true;
  v.push_back({"tree/rave/amaf-batch-everywhere/spread-leaves", k});
  k = o;
  k.prior_games = 32;
  v.push_back({"tree/prior", k});
  k = with_knowledge(o);
  k.virtual_loss = 2;
  v.push_back({"tree/knowledge", k, Hex::all_knowledge});
  for (Parallelism p : {Parallelism::leaf, Parallelism::root, Parallelism::sequential}) {
    o.parallelism = p;
    v.push_back({to_string(p), o});
    k = with_knowledge(o);
    k.parallelism = p;
    v.push_back({p == Parallelism::leaf ? "leaf/knowledge" : p == Parallelism::root ? "root/knowledge" : "sequential/knowledge",
                 k, Hex::all_knowledge});
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
  // Over TCP, UCX emulates one-sided calls with messages the target must
  // progress: a third of the rollouts keeps the variants within the test's
  // time on a loaded machine.
  const char* tls = std::getenv("UCX_TLS");
  const std::uint64_t rollouts = tls != nullptr && std::string_view(tls).find("tcp") != std::string_view::npos ? 1000 : 3000;
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    with_engine(v.options, [&](Engine<Hex>& engine) {
      for (int size : {3, 5}) {  // the engine is reusable; on 3x3 the tree reaches finished games
        Hex start(size);
        start.set_knowledge(v.knowledge);
        const auto r = engine.search(start, Budget{rollouts, 0});
        std::uint64_t expected = rollouts;
        if (v.options.parallelism == Parallelism::root) expected = (rollouts + n - 1) / n * n;
        EXPECT_EQ(r.rollouts, expected);
        EXPECT_EQ(r.nodes + r.terminals, r.rollouts);
        // A tree reaches the end of a 3x3 game within a few hundred
        // rollouts; root parallelism splits them over n trees. Rollouts in
        // flight together spread over the tree's breadth (virtual loss), so
        // a wide window needs a few times its width before one goes deep.
        const std::uint64_t per_tree = v.options.parallelism == Parallelism::root ? expected / n : expected;
        const std::uint64_t window = std::max<std::uint64_t>(std::uint64_t{v.options.inflight} * n, v.options.inflight_floor);
        const bool wide = v.options.parallelism == Parallelism::tree && per_tree < 4 * window;
        if (size == 3 && per_tree >= 500 && !wide) EXPECT_GT(r.terminals, 0u);
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
          EXPECT_GE(r.peak_in_flight, 1u);
          EXPECT_LE(r.peak_in_flight, window);
        }
        // Nothing lost: every statistic a rollout added is in the tree,
        // wherever the rollout's calls went.
        EXPECT_EQ(r.audit.visits_added, r.audit.visits_stored);
        EXPECT_EQ(r.audit.wins_added, r.audit.wins_stored);
        EXPECT_EQ(r.audit.amaf_added, r.audit.amaf_stored);
        EXPECT_GE(r.audit.visits_added, r.rollouts * v.options.playouts);
        if (v.options.rave) EXPECT_GT(r.audit.amaf_added, r.rollouts * v.options.playouts);
        else EXPECT_EQ(r.audit.amaf_added, 0u);
        EXPECT_GE(r.max_depth, 1u);
        EXPECT_GE(r.mean_depth, 1.0);
        EXPECT_LE(r.mean_depth, double(r.max_depth));
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

// RAVE is the framework's, for any game whose playouts report their moves.
// Key: players take the cards 0..11 in turn until none is left; whoever took
// card 5 wins. AMAF sees at once that taking card 5 wins, before the search
// has tried it: with 6 rollouts (half the cards), a search with RAVE finds
// it where one without does so only when chance tries it.
struct Key {
  using Move = std::uint8_t;
  static constexpr std::size_t max_moves = 12;
  static constexpr std::size_t move_space = 12;
  static constexpr Move key = 5;
  static std::uint16_t move_index(Move m) { return m; }
  std::uint16_t taken = 0;  // bit per card
  Player mover = 0, holder = 2;
  Player to_move() const { return mover; }
  std::size_t legal_moves(std::span<Move> out) const {
    std::size_t n = 0;
    for (Move m = 0; m < 12; ++m)
      if (!(taken >> m & 1)) out[n++] = m;
    return n;
  }
  void play(Move m) {
    taken = static_cast<std::uint16_t>(taken | 1u << m);
    if (m == key) holder = mover;
    mover = other(mover);
  }
  bool terminal() const { return taken == 0xfff; }
  Player winner() const { return holder; }
  std::uint64_t hash() const { return taken * 2ull + mover; }
  template <class Report>
  Player play_out(Rng& rng, Report&& report) const {
    Key k = *this;
    Move moves[12];
    while (!k.terminal()) {
      const Move m = moves[rng.below(static_cast<std::uint32_t>(k.legal_moves(moves)))];
      report(m, k.mover);
      k.play(m);
    }
    return k.holder;
  }
  Player playout(Rng& rng) const { return play_out(rng, [](Move, Player) {}); }
  Player playout(Rng& rng, PlayoutTrace<move_space>& trace) const {
    return play_out(rng, [&](Move m, Player p) { trace.played(m, p); });
  }
};
static_assert(AmafGame<Key>);
static_assert(!PriorGame<Key>);

TEST(Search, RaveServesAnyGame) {
  SearchOptions o;
  o.parallelism = Parallelism::sequential;
  o.playouts = 4;
  o.first_play = 0.5;
  int found[2] = {0, 0};
  for (int rave = 0; rave < 2; ++rave) {
    o.rave = rave == 1;
    Engine<Key> engine(o);
    Job::current().run([&](ThreadId me) {
      engine.run(me, [&] {
        for (int i = 0; i < 40; ++i) found[rave] += engine.search(Key{}, Budget{6, 0}).best == Key::key;
      });
    });
  }
  if (Job::current().rank() == 0) {
    std::printf("Key: card 5 found in %d of 40 searches with RAVE, %d without\n", found[1], found[0]);
    EXPECT_GE(found[1], 32) << "with RAVE";
    EXPECT_LE(found[0], 28) << "without";
  }
  o.prior_games = 8;  // Key gives no priors
  EXPECT_THROW(Engine<Key>{o}, std::invalid_argument);
}

TEST(Search, FinalChoice) {
  SearchOptions o;
  o.parallelism = Parallelism::sequential;
  for (FinalChoice f : {FinalChoice::most_visits, FinalChoice::best_mean}) {
    o.final_choice = f;
    with_engine(o, [&](Engine<Hex>& engine) {
      const auto r = engine.search(Hex(5), Budget{300, 0});
      ASSERT_FALSE(r.moves.empty());
      auto mean = [](const auto& m) { return double(m.wins) / m.visits; };
      const auto best = std::find_if(r.moves.begin(), r.moves.end(), [&](auto& m) { return m.move == r.best; });
      ASSERT_NE(best, r.moves.end());
      EXPECT_DOUBLE_EQ(r.win_rate, mean(*best));
      for (const auto& m : r.moves) {
        if (f == FinalChoice::most_visits) EXPECT_GE(best->visits, m.visits);
        else EXPECT_GE(mean(*best), mean(m));
      }
    });
  }
  EXPECT_EQ(parse_final_choice("visits"), FinalChoice::most_visits);
  EXPECT_EQ(parse_final_choice("mean"), FinalChoice::best_mean);
  EXPECT_THROW(parse_final_choice("median"), std::invalid_argument);
}

TEST(Search, RejectsBadInput) {
  SearchOptions zero;
  zero.playouts = 0;
  EXPECT_THROW(Engine<Hex>{zero}, std::invalid_argument);
  SearchOptions many;
  many.rave = true;
  many.playouts = 256;  // AMAF counts a byte per move
  EXPECT_THROW(Engine<Hex>{many}, std::invalid_argument);
  many.rave = false;
  many.virtual_loss = 65;
  EXPECT_THROW(Engine<Hex>{many}, std::invalid_argument);
  with_engine({}, [&](Engine<Hex>& engine) {
    EXPECT_THROW(engine.search(Hex(5), Budget{}), std::invalid_argument);  // no budget
    const Hex over = position(3, "a1 a2 a3", "b1 b2", Hex::white);
    ASSERT_TRUE(over.terminal());
    EXPECT_THROW(engine.search(over, Budget{100, 0}), std::invalid_argument);
  });
  Engine<Hex> idle({});
  EXPECT_THROW(idle.search(Hex(5), Budget{100, 0}), std::logic_error);  // not inside run()
}
