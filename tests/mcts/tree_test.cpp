// The tree's statistics without a search: AMAF counts and their updates,
// guided selection (priors, RAVE, first-play value) and the virtual loss.
#include "mcts/tree.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include "mcts/hex.hpp"

namespace rdmx::mcts {
namespace {

using Counts = AmafCounts<Hex>;
using Trace = PlayoutTrace<Hex::move_space>;

Hex::Move at(const Hex& h, const char* name) { return *h.parse_move(name); }

TEST(Amaf, CountsWhoPlayedWhatAndWon) {
  const Hex h(5);
  Counts counts;
  Trace a, b;
  a.played(at(h, "c3"), Hex::black);
  a.played(at(h, "e5"), Hex::white);
  b.played(at(h, "c3"), Hex::white);
  counts.add(a.entries(), Hex::black);
  counts.add(b.entries(), Hex::black);
  const auto c3 = counts.at[at(h, "c3")], e5 = counts.at[at(h, "e5")];
  EXPECT_EQ(c3.played[Hex::black], 1);
  EXPECT_EQ(c3.won[Hex::black], 1);
  EXPECT_EQ(c3.played[Hex::white], 1);
  EXPECT_EQ(c3.won[Hex::white], 0);
  EXPECT_EQ(e5.played[Hex::white], 1);
  EXPECT_EQ(e5.won[Hex::white], 0);
  EXPECT_EQ(counts.used, at(h, "e5") + 1u);
  for (std::uint32_t i = 0; i < counts.used; ++i)
    if (i != at(h, "c3") && i != at(h, "e5")) EXPECT_EQ(counts.at[i].played[0] + counts.at[i].played[1], 0) << i;
}

TEST(Amaf, PathMovesArePlayedFirstInEveryGame) {
  Counts counts;
  Trace t;
  t.played(7, Hex::white);  // the playouts had white on 7
  counts.add(t.entries(), Hex::white);
  counts.add(t.entries(), Hex::black);
  // Higher in the tree, black chose 7: that came before any playout move.
  counts.path_move(7, Hex::black, 16, 9);
  EXPECT_EQ(counts.at[7].played[Hex::black], 16);
  EXPECT_EQ(counts.at[7].won[Hex::black], 9);
  EXPECT_EQ(counts.at[7].played[Hex::white], 0);
  EXPECT_EQ(counts.at[7].won[Hex::white], 0);
  counts.path_move(40, Hex::white, 16, 7);  // beyond what the playouts used
  EXPECT_EQ(counts.used, 41u);
  EXPECT_EQ(counts.at[39].played[0] + counts.at[39].played[1], 0);
}

TEST(Amaf, TravelsAsBytes) {
  Counts counts, copy;
  counts.path_move(3, Hex::black, 16, 5);
  counts.path_move(11, Hex::white, 16, 11);
  ASSERT_TRUE(copy.assign(counts.bytes()));
  EXPECT_EQ(copy.used, counts.used);
  EXPECT_EQ(std::memcmp(copy.at, counts.at, counts.used * sizeof(Counts::Entry)), 0);
  const auto bytes = counts.bytes();
  EXPECT_FALSE(copy.assign(bytes.subspan(1)));  // not whole entries
  EXPECT_TRUE(copy.assign({}));
  EXPECT_EQ(copy.used, 0u);
}

TEST(Amaf, SharesMerge) {
  Counts a, b;
  a.path_move(2, Hex::black, 3, 1);
  b.path_move(5, Hex::white, 4, 4);
  b.path_move(2, Hex::black, 2, 2);
  a.merge(b);
  EXPECT_EQ(a.used, 6u);
  EXPECT_EQ(a.at[2].played[Hex::black], 5);
  EXPECT_EQ(a.at[2].won[Hex::black], 3);
  EXPECT_EQ(a.at[5].played[Hex::white], 4);
}

TEST(Amaf, SimulateCountsEveryPlayout) {
  Rng rng(3);
  Hex h(7);
  h.play(at(h, "d4"));
  for (std::uint8_t knowledge : {std::uint8_t{0}, std::uint8_t{Hex::all_knowledge}}) {
    h.set_knowledge(knowledge);
    Counts counts;
    const std::uint32_t black_wins = simulate(h, 40, rng, counts);
    std::uint64_t played[2] = {0, 0}, won[2] = {0, 0};
    for (std::uint32_t i = 0; i < counts.used; ++i)
      for (int p = 0; p < 2; ++p) {
        played[p] += counts.at[i].played[p];
        won[p] += counts.at[i].won[p];
        EXPECT_LE(counts.at[i].won[p], counts.at[i].played[p]);
        EXPECT_LE(counts.at[i].played[0] + counts.at[i].played[1], 40);
      }
    EXPECT_EQ(counts.at[at(h, "d4")].played[0] + counts.at[at(h, "d4")].played[1], 0);  // taken before
    EXPECT_GT(won[Hex::black] + won[Hex::white], 0u);
    if (knowledge == 0) {
      // A fill plays all 48 empty cells, white first: 24 each per playout.
      EXPECT_EQ(played[Hex::white], 40u * 24);
      EXPECT_EQ(played[Hex::black], 40u * 24);
      EXPECT_EQ(won[Hex::black], 24u * black_wins);
    }
  }
}

// A node of the 3x3 board, black to move, with its moves made.
struct Fixture {
  Rng rng{1};
  Node<Hex> node{Hex(3), ThreadId{0, 0}};
  Children<Hex>* children = nullptr;
  explicit Fixture(Expansion how) { children = &node.expand(rng, how); }
  Slot<Hex>& slot(Hex::Move m) {
    for (auto& s : children->slots)
      if (s.move == m) return s;
    throw std::logic_error("no slot");
  }
  std::size_t index(Hex::Move m) { return static_cast<std::size_t>(&slot(m) - children->slots.data()); }
};

TEST(Amaf, AddsToTheMoversMovesOnly) {
  Fixture f({true, 0});
  ASSERT_EQ(f.children->amaf.size(), 9u);
  Counts counts;
  counts.path_move(4, Hex::black, 16, 10);  // black's move in the path
  counts.path_move(0, Hex::white, 16, 6);   // white's: not black's AMAF
  Trace t;
  t.played(8, Hex::black);
  counts.add(t.entries(), Hex::white);
  EXPECT_EQ(add_amaf(*f.children, Hex::black, counts), 17u);
  EXPECT_EQ(f.children->amaf[f.index(4)].load(), Amaf::pack(16, 10));
  EXPECT_EQ(f.children->amaf[f.index(8)].load(), Amaf::pack(1, 0));
  EXPECT_EQ(f.children->amaf[f.index(0)].load(), 0u);
  EXPECT_EQ(add_amaf(*f.children, Hex::black, counts), 17u);
  EXPECT_EQ(f.children->amaf[f.index(4)].load(), Amaf::pack(32, 20));
}

TEST(Amaf, BatchesReachTheTreeWholeAndLate) {
  Fixture f({true, 0}), g({true, 0});
  Counts counts;
  counts.path_move(4, Hex::black, 16, 10);
  counts.path_move(0, Hex::white, 16, 6);  // not black's
  Trace t;
  t.played(8, Hex::black);
  counts.add(t.entries(), Hex::white);
  AmafBatches<Hex> batches(1);  // one place: every node takes it
  // Gathered, not yet in the tree: the words move once a batch is full.
  for (int i = 0; i < 2; ++i) EXPECT_EQ(batches.add(*f.children, Hex::black, counts, 3), 17u);
  EXPECT_EQ(f.children->amaf[f.index(4)].load(), 0u);
  EXPECT_EQ(batches.add(*f.children, Hex::black, counts, 3), 17u);
  EXPECT_EQ(f.children->amaf[f.index(4)].load(), Amaf::pack(48, 30));
  EXPECT_EQ(f.children->amaf[f.index(8)].load(), Amaf::pack(3, 0));
  EXPECT_EQ(f.children->amaf[f.index(0)].load(), 0u);
  EXPECT_EQ(batches.add(*f.children, Hex::black, counts, 3), 17u);
  EXPECT_EQ(f.children->amaf[f.index(4)].load(), Amaf::pack(48, 30));
  // Another node takes the place: the batch there goes into the tree first.
  EXPECT_EQ(batches.add(*g.children, Hex::black, counts, 3), 17u);
  EXPECT_EQ(f.children->amaf[f.index(4)].load(), Amaf::pack(64, 40));
  EXPECT_EQ(f.children->amaf[f.index(8)].load(), Amaf::pack(4, 0));
  EXPECT_EQ(g.children->amaf[g.index(4)].load(), 0u);
  EXPECT_EQ(batches.nodes(), 1u);
  // flush() adds what is left and forgets the nodes.
  batches.flush();
  EXPECT_EQ(batches.nodes(), 0u);
  EXPECT_EQ(g.children->amaf[g.index(4)].load(), Amaf::pack(16, 10));
  EXPECT_EQ(f.children->amaf[f.index(4)].load(), Amaf::pack(64, 40));
  batches.flush();  // nothing left
  EXPECT_EQ(g.children->amaf[g.index(4)].load(), Amaf::pack(16, 10));
}

TEST(Selection, RaveSteersTowardsMovesThatWonElsewhere) {
  Fixture f({true, 0});
  SelectionRule rule;
  rule.rave = true;
  rule.c = 0.1;
  // Every move has been tried once and lost half; cell 4 won all its AMAF games.
  for (auto& s : f.children->slots) {
    s.visits = 16;
    s.wins = 8;
  }
  f.node.visits = 16 * 9;
  f.children->amaf[f.index(4)] = Amaf::pack(200, 200);
  f.children->amaf[f.index(2)] = Amaf::pack(200, 20);
  EXPECT_EQ(select_guided(f.node, *f.children, rule)->move, 4);
  // Without RAVE, the AMAF words count for nothing.
  rule.rave = false;
  f.children->slots[f.index(6)].wins = 9;
  EXPECT_EQ(select_guided(f.node, *f.children, rule)->move, 6);
}

TEST(Selection, RaveGivesWayToTheMovesOwnGames) {
  Fixture f({true, 0});
  SelectionRule rule;
  rule.rave = true;
  rule.c = 0;
  rule.rave_equivalence = 100;
  Slot<Hex>& a = f.slot(1);
  Slot<Hex>& b = f.slot(2);
  for (auto& s : f.children->slots) s.visits = 10000, s.wins = 0;
  f.node.visits = 10000 * 9;
  // a: great AMAF, poor own record; b: the reverse. With many games of its
  // own, a move's own value decides.
  a.wins = 3000;
  f.children->amaf[f.index(1)] = Amaf::pack(10000, 9000);
  b.wins = 7000;
  f.children->amaf[f.index(2)] = Amaf::pack(10000, 1000);
  EXPECT_EQ(select_guided(f.node, *f.children, rule)->move, 2);
  // With few games of their own, AMAF decides.
  a.visits = b.visits = 10;
  a.wins = 3;
  b.wins = 7;
  EXPECT_EQ(select_guided(f.node, *f.children, rule)->move, 1);
}

TEST(Selection, PriorsRankUntriedMoves) {
  Fixture f({false, 32});
  // The empty 3x3 board: all cells are edge cells but the centre, whose prior is neutral.
  EXPECT_EQ(f.slot(4).prior_visits, 32);
  EXPECT_EQ(f.slot(4).prior_wins, 16);
  EXPECT_EQ(f.slot(0).prior_visits, 32);
  EXPECT_EQ(f.slot(0).prior_wins, 11);  // 0.35 of 32
  SelectionRule rule;
  rule.c = 0.2;
  EXPECT_EQ(select_guided(f.node, *f.children, rule)->move, 4);
}

TEST(Selection, FirstPlayValueForMovesNothingIsKnownOf) {
  Fixture f({true, 0});
  SelectionRule rule;
  rule.rave = true;
  rule.c = 0;
  for (auto& s : f.children->slots) s.visits = 16, s.wins = 12;  // all tried, 75 %
  f.slot(5).visits = 0;
  f.slot(5).wins = 0;
  f.node.visits = 16 * 8;
  rule.first_play = 1.0;
  EXPECT_EQ(select_guided(f.node, *f.children, rule)->move, 5);
  rule.first_play = 0.5;
  EXPECT_NE(select_guided(f.node, *f.children, rule)->move, 5);
}

TEST(Selection, VirtualLoss) {
  Fixture f({false, 0});
  Slot<Hex>& s = f.slot(3);
  SelectionRule rule;
  rule.playouts = 16;
  s.visits = 64;  // two rollouts done, two in flight
  s.pending = 2;
  rule.virtual_loss = 1;
  EXPECT_EQ(counted_visits(s, rule), 64.0);
  rule.virtual_loss = 0;  // only the games that came home
  EXPECT_EQ(counted_visits(s, rule), 32.0);
  rule.virtual_loss = 3;  // each rollout in flight counts three times
  EXPECT_EQ(counted_visits(s, rule), 128.0);
  // add_visits keeps the count of rollouts in flight only when it matters.
  Slot<Hex>& t = f.slot(7);
  add_visits(f.node, t, rule);
  EXPECT_EQ(t.visits.load(), 16u);
  EXPECT_EQ(t.pending.load(), 1u);
  rule.virtual_loss = 1;
  add_visits(f.node, t, rule);
  EXPECT_EQ(t.pending.load(), 1u);
  rule.guided = true;
  add_visits(f.node, t, rule);
  EXPECT_EQ(t.pending.load(), 2u);
}

TEST(Selection, VirtualLossMovesRaveValues) {
  // Two moves alike but for rollouts in flight: AMAF values on thousands of
  // games decide both, and the virtual loss still turns selection away
  // from the one with a rollout on its way.
  Fixture f({true, 0});
  SelectionRule rule;
  rule.rave = true;
  rule.guided = true;
  rule.c = 0.1;
  for (auto& s : f.children->slots) s.visits = 160, s.wins = 80;
  f.node.visits = 160 * 9;
  for (auto& word : f.children->amaf) word = Amaf::pack(5000, 2500);
  f.children->amaf[f.index(4)] = Amaf::pack(5000, 2600);  // 52 %: the best
  EXPECT_EQ(select_guided(f.node, *f.children, rule)->move, 4);
  Slot<Hex>& best = f.slot(4);
  best.visits = 176;  // one rollout of 16 games on its way
  best.pending = 1;
  rule.virtual_loss = 1;
  EXPECT_NE(select_guided(f.node, *f.children, rule)->move, 4);
  rule.virtual_loss = 0;  // no virtual loss: the rollout in flight is not counted at all
  EXPECT_EQ(select_guided(f.node, *f.children, rule)->move, 4);
}

TEST(Selection, ClaimingIsOnce) {
  Fixture f({false, 0});
  Slot<Hex>& s = f.slot(0);
  EXPECT_TRUE(s.try_claim());
  EXPECT_FALSE(s.try_claim());
  EXPECT_EQ(s.status.load(), Slot<Hex>::creating);
}

}  // namespace
}  // namespace rdmx::mcts
