#include "mcts/hex.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <queue>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace rdmx::mcts {
namespace {

using Rows = std::vector<std::string>;

Hex::Move cell(const Hex& h, int row, int col) { return static_cast<Hex::Move>(row * h.size() + col); }

// A position from rows of 'X' (black), 'O' (white) and '.'; the stones must not end the game.
Hex board(const Rows& rows, Player to_move = Hex::black) {
  Hex h(static_cast<int>(rows.size()));
  for (int r = 0; r < h.size(); ++r)
    for (int c = 0; c < h.size(); ++c)
      if (rows[r][c] != '.') {
        EXPECT_FALSE(h.terminal()) << "the position is over before " << h.move_name(cell(h, r, c));
        h.place(cell(h, r, c), rows[r][c] == 'X' ? Hex::black : Hex::white);
      }
  h.set_to_move(to_move);
  return h;
}

// The same position seen across the main diagonal, colours swapped: black's
// connections become white's.
Rows mirror(const Rows& rows) {
  Rows out(rows.size(), std::string(rows.size(), '.'));
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (std::size_t c = 0; c < rows.size(); ++c)
      out[c][r] = rows[r][c] == 'X' ? 'O' : rows[r][c] == 'O' ? 'X' : '.';
  return out;
}

// Deliberately simple and independent of Hex's internals: a BFS whose
// neighbours are the 8 surrounding cells but the two across the main diagonal.
bool reference_connects(const Hex& h, Player p) {
  const int n = h.size();
  std::vector<std::vector<bool>> seen(n, std::vector<bool>(n, false));
  std::queue<std::pair<int, int>> queue;
  for (int i = 0; i < n; ++i) {
    const int r = p == Hex::black ? 0 : i, c = p == Hex::black ? i : 0;
    if (h.stone(cell(h, r, c)) == p) {
      seen[r][c] = true;
      queue.push({r, c});
    }
  }
  while (!queue.empty()) {
    const auto [r, c] = queue.front();
    queue.pop();
    if ((p == Hex::black ? r : c) == n - 1) return true;
    for (int dr = -1; dr <= 1; ++dr)
      for (int dc = -1; dc <= 1; ++dc) {
        const int rr = r + dr, cc = c + dc;
        if (dr == dc || rr < 0 || rr >= n || cc < 0 || cc >= n) continue;
        if (seen[rr][cc] || h.stone(cell(h, rr, cc)) != p) continue;
        seen[rr][cc] = true;
        queue.push({rr, cc});
      }
  }
  return false;
}

std::uint64_t recomputed_hash(const Hex& h) {
  std::uint64_t key = h.to_move() == Hex::white ? Hex::white_to_move_key() : 0;
  for (int m = 0; m < h.size() * h.size(); ++m)
    if (h.stone(static_cast<Hex::Move>(m)) != Hex::empty)
      key ^= Hex::stone_key(static_cast<Hex::Move>(m), h.stone(static_cast<Hex::Move>(m)));
  return key;
}

std::size_t count_legal(const Hex& h) {
  std::array<Hex::Move, Hex::max_moves> moves;
  return h.legal_moves(moves);
}

// A random game of at most `moves` moves, stopped early if it ends.
Hex random_game(int size, int moves, Rng& rng) {
  Hex h(size);
  std::array<Hex::Move, Hex::max_moves> legal;
  for (int i = 0; i < moves && !h.terminal(); ++i) h.play(legal[rng.below(static_cast<std::uint32_t>(h.legal_moves(legal)))]);
  return h;
}

// Each stone of a minimal chain is needed: the chain without it is a near
// miss, and placing it last wins for the chain's owner.
void expect_minimal_winning_chain(const Rows& rows, Player owner) {
  const char mark = owner == Hex::black ? 'X' : 'O';
  const int n = static_cast<int>(rows.size());
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < n; ++c) {
      if (rows[r][c] != mark) continue;
      Rows missing = rows;
      missing[r][c] = '.';
      Hex h = board(missing, owner);
      const std::string name = h.move_name(cell(h, r, c));
      ASSERT_FALSE(h.terminal()) << "won without " << name;
      ASSERT_FALSE(reference_connects(h, owner)) << name;
      h.play(cell(h, r, c));
      EXPECT_TRUE(h.terminal()) << "not won by " << name;
      EXPECT_EQ(h.winner(), owner) << name;
      EXPECT_TRUE(reference_connects(h, owner)) << name;
      EXPECT_EQ(count_legal(h), 0u) << name;
    }
}

void expect_not_won(const Rows& rows) {
  const Hex h = board(rows);
  EXPECT_FALSE(h.terminal());
  EXPECT_FALSE(reference_connects(h, Hex::black));
  EXPECT_FALSE(reference_connects(h, Hex::white));
  EXPECT_EQ(count_legal(h), static_cast<std::size_t>(h.size() * h.size() - h.moves_played()));
}

TEST(Hex, RejectsBadSizes) {
  EXPECT_THROW(Hex(0), std::invalid_argument);
  EXPECT_THROW(Hex(-3), std::invalid_argument);
  EXPECT_THROW(Hex(20), std::invalid_argument);
  EXPECT_EQ(Hex(1).size(), 1);
  EXPECT_EQ(Hex(19).size(), 19);
  EXPECT_EQ(Hex().size(), 11);
}

TEST(Hex, StateIsCompact) {
  static_assert(Game<Hex>);
  static_assert(std::is_trivially_copyable_v<Hex>);
  EXPECT_LE(sizeof(Hex), 384u);
}

TEST(Hex, EmptyBoard) {
  for (int n : {1, 2, 5, 11, 19}) {
    const Hex h(n);
    EXPECT_EQ(h.to_move(), Hex::black);
    EXPECT_EQ(h.moves_played(), 0);
    EXPECT_FALSE(h.terminal());
    std::array<Hex::Move, Hex::max_moves> moves;
    ASSERT_EQ(h.legal_moves(moves), static_cast<std::size_t>(n * n));
    for (int m = 0; m < n * n; ++m) {
      EXPECT_EQ(moves[m], m);
      EXPECT_EQ(h.stone(moves[m]), Hex::empty);
    }
  }
}

TEST(Hex, PlayAlternatesAndFillsCells) {
  Hex h(5);
  h.play(cell(h, 2, 2));
  EXPECT_EQ(h.stone(cell(h, 2, 2)), Hex::black);
  EXPECT_EQ(h.to_move(), Hex::white);
  h.play(cell(h, 0, 4));
  EXPECT_EQ(h.stone(cell(h, 0, 4)), Hex::white);
  EXPECT_EQ(h.to_move(), Hex::black);
  EXPECT_EQ(h.moves_played(), 2);
  std::array<Hex::Move, Hex::max_moves> moves;
  const std::size_t count = h.legal_moves(moves);
  EXPECT_EQ(count, 23u);
  EXPECT_EQ(std::count(moves.begin(), moves.begin() + count, cell(h, 2, 2)), 0);
  EXPECT_EQ(std::count(moves.begin(), moves.begin() + count, cell(h, 0, 4)), 0);
}

TEST(Hex, PlaceSetsUpEitherColour) {
  Hex h(5);
  h.place(cell(h, 1, 1), Hex::white);
  EXPECT_EQ(h.stone(cell(h, 1, 1)), Hex::white);
  EXPECT_EQ(h.to_move(), Hex::black);
  h.place(cell(h, 2, 2), Hex::white);
  EXPECT_EQ(h.to_move(), Hex::black);
  h.set_to_move(Hex::white);
  EXPECT_EQ(h.to_move(), Hex::white);
  EXPECT_EQ(h.moves_played(), 2);
}

TEST(Hex, OneByOne) {
  Hex h(1);
  h.play(0);
  EXPECT_TRUE(h.terminal());
  EXPECT_EQ(h.winner(), Hex::black);
  EXPECT_EQ(count_legal(h), 0u);
  Hex w(1);
  w.place(0, Hex::white);
  EXPECT_TRUE(w.terminal());
  EXPECT_EQ(w.winner(), Hex::white);
}

TEST(Hex, TwoByTwo) {
  expect_minimal_winning_chain({".X", "X."}, Hex::black);
  expect_minimal_winning_chain({".O", "O."}, Hex::white);
  expect_minimal_winning_chain({"X.", "X."}, Hex::black);
  expect_minimal_winning_chain({"OO", ".."}, Hex::white);
  expect_not_won({"X.", ".X"});  // across the main diagonal cells do not touch
  expect_not_won({"O.", ".O"});
  expect_not_won({"XX", ".."});  // black along a row, white down a column: wrong edges
  expect_not_won({"O.", "O."});
}

TEST(Hex, StraightChains) {
  const Rows column = {"..X..", "..X..", "..X..", "..X..", "..X.."};
  expect_minimal_winning_chain(column, Hex::black);
  expect_minimal_winning_chain(mirror(column), Hex::white);
}

TEST(Hex, ZigZagChains) {
  const Rows zigzag = {".X...", ".XX..", "..X..", ".X...", ".X..."};
  expect_minimal_winning_chain(zigzag, Hex::black);
  expect_minimal_winning_chain(mirror(zigzag), Hex::white);
  const Rows short_diagonal = {"....X", "...X.", "..X..", ".X...", "X...."};
  expect_minimal_winning_chain(short_diagonal, Hex::black);
  expect_minimal_winning_chain(mirror(short_diagonal), Hex::white);
  const Rows snake = {"X......", "XXXXXX.", ".....X.", ".XXXX..", "X......", "XXXXXXX", "......X"};
  expect_minimal_winning_chain(snake, Hex::black);
  expect_minimal_winning_chain(mirror(snake), Hex::white);
}

TEST(Hex, NearMisses) {
  const Rows long_diagonal = {"X....", ".X...", "..X..", "...X.", "....X"};
  expect_not_won(long_diagonal);
  expect_not_won(mirror(long_diagonal));
  const Rows top_only = {"..X..", "..X..", "..X..", "..X..", "....."};
  expect_not_won(top_only);
  expect_not_won(mirror(top_only));
  const Rows bottom_only = {".....", "..X..", "..X..", "..X..", "..X.."};
  expect_not_won(bottom_only);
  expect_not_won(mirror(bottom_only));
  const Rows wrong_edges = {".....", ".....", "XXXXX", ".....", "....."};
  expect_not_won(wrong_edges);
  expect_not_won(mirror(wrong_edges));
  // Two groups, each on one edge, with a cut between them.
  const Rows blocked = {"..X..", "..X..", "OOOOX", "..X..", "..X.."};
  expect_not_won(blocked);
}

TEST(Hex, JoiningTwoGroupsWins) {
  Hex h = board({"..X..", "..X..", ".....", "..X..", "..X.."});
  h.place(cell(h, 2, 1), Hex::black);  // touches the top group only: (2,1) and (3,2) are not neighbours
  EXPECT_FALSE(h.terminal());
  h.place(cell(h, 2, 2), Hex::black);
  EXPECT_TRUE(h.terminal());
  EXPECT_EQ(h.winner(), Hex::black);
}

TEST(Hex, RandomGamesMatchReference) {
  Rng rng(7);
  std::array<Hex::Move, Hex::max_moves> legal;
  for (int n : {2, 3, 5, 7, 11}) {
    for (int game = 0; game < 100; ++game) {
      Hex h(n);
      while (!h.terminal()) {
        const std::size_t count = h.legal_moves(legal);
        ASSERT_EQ(count, static_cast<std::size_t>(n * n - h.moves_played()));
        h.play(legal[rng.below(static_cast<std::uint32_t>(count))]);
        const bool black = reference_connects(h, Hex::black), white = reference_connects(h, Hex::white);
        ASSERT_FALSE(black && white);
        ASSERT_EQ(h.terminal(), black || white) << h.board_text();
      }
      EXPECT_EQ(h.winner(), reference_connects(h, Hex::black) ? Hex::black : Hex::white);
      EXPECT_EQ(h.legal_moves(legal), 0u);
    }
  }
}

// Checks one random_fill of h against the reference and returns its winner.
Player check_fill(const Hex& h, std::uint64_t seed) {
  std::array<unsigned char, sizeof(Hex)> before;
  std::memcpy(before.data(), &h, sizeof(Hex));
  Rng rng(seed), same(seed);
  const Hex full = h.random_fill(rng);
  EXPECT_EQ(std::memcmp(before.data(), &h, sizeof(Hex)), 0);

  const int n = h.size(), open = n * n - h.moves_played();
  int mover_stones = 0;
  for (int m = 0; m < n * n; ++m) {
    const auto move = static_cast<Hex::Move>(m);
    EXPECT_NE(full.stone(move), Hex::empty);
    if (h.stone(move) != Hex::empty) {
      EXPECT_EQ(full.stone(move), h.stone(move));
    } else {
      mover_stones += full.stone(move) == h.to_move();
    }
  }
  EXPECT_EQ(mover_stones, (open + 1) / 2);  // alternate colouring, mover first
  EXPECT_EQ(full.moves_played(), n * n);
  EXPECT_EQ(full.to_move(), open % 2 == 1 ? other(h.to_move()) : h.to_move());
  EXPECT_EQ(full.hash(), recomputed_hash(full));

  const bool black = reference_connects(full, Hex::black), white = reference_connects(full, Hex::white);
  EXPECT_NE(black, white) << full.board_text();
  EXPECT_TRUE(full.terminal());
  EXPECT_EQ(full.winner(), black ? Hex::black : Hex::white) << full.board_text();
  EXPECT_EQ(h.playout(same), full.winner());
  return full.winner();
}

TEST(Hex, RandomFullBoardsHaveExactlyOneWinner) {
  for (int n : {1, 2, 3, 5, 7, 11}) {
    const Hex empty_board(n);
    std::set<std::uint64_t> boards;
    int black_wins = 0;
    for (std::uint64_t seed = 1; seed <= 2000; ++seed) {
      black_wins += check_fill(empty_board, seed) == Hex::black;
      Rng rng(seed);
      boards.insert(empty_board.random_fill(rng).hash());
    }
    if (n == 1) continue;
    EXPECT_GT(black_wins, 0) << n;
    EXPECT_LT(black_wins, 2000) << n;
    if (n >= 5) {
      EXPECT_GT(boards.size(), 1900u) << n;  // the fills really are random
    }
  }
}

TEST(Hex, RandomFillsOfPartialGames) {
  Rng rng(11);
  for (int n : {3, 5, 7, 11}) {
    for (int i = 0; i < 500; ++i) {
      Hex h = random_game(n, static_cast<int>(rng.below(static_cast<std::uint32_t>(n * n))), rng);
      if (h.terminal()) continue;
      if (rng.below(2) == 1) h.set_to_move(other(h.to_move()));  // also odd set-ups
      check_fill(h, rng());
    }
  }
}

TEST(Hex, PlayoutOfTerminalStateIsItsWinner) {
  Hex h = board({"X..", "X..", "..."});
  h.play(cell(h, 2, 0));
  ASSERT_TRUE(h.terminal());
  Rng rng(3);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(h.playout(rng), Hex::black);
}

TEST(Hex, PlayoutLeavesStateUnchanged) {
  Rng rng(5);
  const Hex h = random_game(11, 30, rng);
  std::array<unsigned char, sizeof(Hex)> before;
  std::memcpy(before.data(), &h, sizeof(Hex));
  for (int i = 0; i < 100; ++i) h.playout(rng);
  EXPECT_EQ(std::memcmp(before.data(), &h, sizeof(Hex)), 0);
}

TEST(Hex, PlayoutFromDecidedPosition) {
  // Black's two groups are joined by a bridge: whoever is to move, a fill
  // gives black one of the two empty cells, and either one connects.
  const Rows bridge = {"OOXOO", "OOXOO", "O..OO", "OXOOO", "OXOOO"};
  for (Player owner : {Hex::black, Hex::white}) {
    const Rows rows = owner == Hex::black ? bridge : mirror(bridge);
    for (Player to_move : {Hex::black, Hex::white}) {
      const Hex h = board(rows, to_move);
      ASSERT_FALSE(h.terminal());
      Rng rng(9);
      for (int i = 0; i < 200; ++i) ASSERT_EQ(h.playout(rng), owner);
    }
  }
}

TEST(Hex, ZobristTranspositions) {
  Hex a(7), b(7);
  for (const char* name : {"a1", "b2", "c3", "d4", "e5"}) a.play(*a.parse_move(name));
  for (const char* name : {"e5", "d4", "a1", "b2", "c3"}) b.play(*b.parse_move(name));
  EXPECT_EQ(a.hash(), b.hash());
  Hex c(7);  // set-up stones reach the same position too
  for (const char* name : {"a1", "c3", "e5"}) c.place(*c.parse_move(name), Hex::black);
  for (const char* name : {"b2", "d4"}) c.place(*c.parse_move(name), Hex::white);
  c.set_to_move(a.to_move());
  EXPECT_EQ(c.hash(), a.hash());
  Hex d(7);  // same cells, colours exchanged
  for (const char* name : {"b2", "a1", "d4", "c3", "e5"}) d.play(*d.parse_move(name));
  EXPECT_NE(d.hash(), a.hash());
}

TEST(Hex, ZobristSideToMove) {
  Hex h(5);
  const std::uint64_t black_to_move = h.hash();
  h.set_to_move(Hex::white);
  EXPECT_NE(h.hash(), black_to_move);
  h.set_to_move(Hex::white);
  EXPECT_EQ(h.hash(), black_to_move ^ Hex::white_to_move_key());
  h.set_to_move(Hex::black);
  EXPECT_EQ(h.hash(), black_to_move);
  Hex once(5), twice(5);
  once.place(3, Hex::black);
  twice.place(3, Hex::black);
  twice.set_to_move(Hex::black);
  EXPECT_NE(once.hash(), twice.hash());
}

TEST(Hex, ZobristMatchesRecomputation) {
  Rng rng(13);
  std::array<Hex::Move, Hex::max_moves> legal;
  for (int n : {1, 4, 11, 19}) {
    for (int game = 0; game < 20; ++game) {
      Hex h(n);
      EXPECT_EQ(h.hash(), recomputed_hash(h));
      while (!h.terminal()) {
        h.play(legal[rng.below(static_cast<std::uint32_t>(h.legal_moves(legal)))]);
        ASSERT_EQ(h.hash(), recomputed_hash(h));
      }
    }
  }
}

TEST(Hex, ZobristKeysAreDistinct) {
  std::set<std::uint64_t> keys{Hex::white_to_move_key()};
  for (int m = 0; m < static_cast<int>(Hex::max_moves); ++m)
    for (Player p : {Hex::black, Hex::white}) keys.insert(Hex::stone_key(static_cast<Hex::Move>(m), p));
  EXPECT_EQ(keys.size(), 2 * Hex::max_moves + 1);
  EXPECT_EQ(keys.count(0), 0u);
}

TEST(Hex, MoveNamesRoundTrip) {
  for (int n : {1, 11, 19}) {
    const Hex h(n);
    std::set<std::string> names;
    for (int m = 0; m < n * n; ++m) {
      const auto move = static_cast<Hex::Move>(m);
      const std::string name = h.move_name(move);
      names.insert(name);
      EXPECT_EQ(h.parse_move(name), move) << name;
      std::string upper = name;
      upper[0] = static_cast<char>(upper[0] - 'a' + 'A');
      EXPECT_EQ(h.parse_move(upper), move) << upper;
    }
    EXPECT_EQ(names.size(), static_cast<std::size_t>(n * n));
  }
}

TEST(Hex, MoveNamesFollowHexGui) {
  const Hex h(11);
  EXPECT_EQ(h.move_name(0), "a1");
  EXPECT_EQ(h.move_name(cell(h, 4, 2)), "c5");
  EXPECT_EQ(h.move_name(cell(h, 0, 10)), "k1");
  EXPECT_EQ(h.move_name(cell(h, 10, 0)), "a11");
  EXPECT_EQ(h.parse_move("C5"), cell(h, 4, 2));
  EXPECT_EQ(h.parse_move("k11"), cell(h, 10, 10));
  EXPECT_EQ(Hex(19).parse_move("s19"), 360);
}

TEST(Hex, ParseRejectsJunk) {
  const Hex h(11);
  for (const char* junk : {"", "a", "1", "a0", "a01", "a12", "l1", "L1", "k12", "1a", "aa1", "a1 ", " a1", "a1x", "a-1",
                           "a+1", "a1.", "@1", "`1", "a111", "resign", "pass"})
    EXPECT_EQ(h.parse_move(junk), std::nullopt) << '"' << junk << '"';
  EXPECT_EQ(Hex(19).parse_move("t1"), std::nullopt);
  EXPECT_EQ(Hex(19).parse_move("a20"), std::nullopt);
  EXPECT_EQ(Hex(1).parse_move("b1"), std::nullopt);
  EXPECT_EQ(Hex(1).parse_move("a2"), std::nullopt);
}

TEST(Hex, BoardText) {
  Hex h(3);
  h.play(*h.parse_move("a1"));
  h.play(*h.parse_move("c2"));
  EXPECT_EQ(h.board_text(),
            "   a b c\n"
            " 1 X . . 1\n"
            "  2 . . O 2\n"
            "   3 . . . 3\n"
            "      a b c\n");
  const std::string big = Hex(11).board_text();
  EXPECT_NE(big.find("\n         9 . . . . . . . . . . . 9\n"), std::string::npos) << big;
  EXPECT_NE(big.find("\n         10 . . . . . . . . . . . 10\n"), std::string::npos) << big;
}

// ---- Hex knowledge -----------------------------------------------------------

using Trace = PlayoutTrace<Hex::move_space>;

// The position of `rows` with `last` (a stone of rows) as the last move
// played, so that the player to move may answer it.
Hex after_last_move(const Rows& rows, const std::string& last, Player to_move, std::uint8_t knowledge) {
  Rows without = rows;
  Hex probe(static_cast<int>(rows.size()));
  const auto m = *probe.parse_move(last);
  const int r = m / probe.size(), c = m % probe.size();
  const Player owner = rows[r][c] == 'X' ? Hex::black : Hex::white;
  without[r][c] = '.';
  Hex h = board(without, owner);
  h.play(m);
  EXPECT_EQ(h.to_move(), to_move);
  h.set_knowledge(knowledge);
  return h;
}

// How often each cell was a playout's first move, over `playouts` playouts.
std::vector<int> first_moves(const Hex& h, int playouts, std::uint64_t seed = 1) {
  std::vector<int> count(static_cast<std::size_t>(h.size() * h.size()), 0);
  Rng rng(seed);
  Trace trace;
  for (int i = 0; i < playouts; ++i) {
    trace.clear();
    h.playout(rng, trace);
    EXPECT_FALSE(trace.entries().empty());
    if (!trace.entries().empty()) ++count[trace.entries()[0].index];
  }
  return count;
}

// Black's stones c2 and d3 form a bridge (carrier d2 and c3); white has just
// played d2.
const Rows intruded_bridge = {".....", "..XO.", "...X.", ".....", "....."};

TEST(HexKnowledge, SaveBridgeAnswersTheIntrusion) {
  for (Player owner : {Hex::black, Hex::white}) {
    // The mirror image: white's bridge b3-c4, black intrudes at b4.
    const Rows rows = owner == Hex::black ? intruded_bridge : mirror(intruded_bridge);
    const std::string intruder = owner == Hex::black ? "d2" : "b4", reply = owner == Hex::black ? "c3" : "c3";
    const Hex h = after_last_move(rows, intruder, owner, Hex::save_bridge);
    const auto counts = first_moves(h, 200);
    EXPECT_EQ(counts[*h.parse_move(reply)], 200) << h.board_text();
    // Without the flag the first move is anywhere.
    Hex plain = h;
    plain.set_knowledge(Hex::save_edge | Hex::early_win);
    const auto spread = first_moves(plain, 200);
    EXPECT_LT(spread[*h.parse_move(reply)], 60);
    EXPECT_GT(std::count_if(spread.begin(), spread.end(), [](int n) { return n > 0; }), 10);
  }
}

TEST(HexKnowledge, SaveBridgeOnlyAnswersTheLastMove) {
  // The same intrusion, but white's last stone went to e5 since: black's
  // first move is anywhere.
  Rows rows = intruded_bridge;
  rows[4][4] = 'O';
  const Hex h = after_last_move(rows, "e5", Hex::black, Hex::all_knowledge);
  EXPECT_LT(first_moves(h, 300)[*h.parse_move("c3")], 60);
}

TEST(HexKnowledge, SaveEdgeAnswersTheIntrusion) {
  // Black's c2 reaches the top edge through c1 or d1; white takes c1.
  const Rows edge = {"..O..", "..X..", ".....", ".....", "....."};
  for (Player owner : {Hex::black, Hex::white}) {
    const Rows rows = owner == Hex::black ? edge : mirror(edge);
    const std::string intruder = owner == Hex::black ? "c1" : "a3", reply = owner == Hex::black ? "d1" : "a4";
    const Hex h = after_last_move(rows, intruder, owner, Hex::save_edge);
    EXPECT_EQ(first_moves(h, 200)[*h.parse_move(reply)], 200) << h.board_text();
    Hex bridges_only = h;
    bridges_only.set_knowledge(Hex::save_bridge);  // a bridge to the edge is save_edge's
    EXPECT_LT(first_moves(bridges_only, 200)[*h.parse_move(reply)], 60);
  }
}

TEST(HexKnowledge, TwoIntrudedBridgesGetEitherReply) {
  // White's c3 breaks into black's bridges c2-d3 (reply d2) and b3-c4 (reply b4).
  const Rows rows = {".....", "..X..", ".XOX.", "..X..", "....."};
  const Hex h = after_last_move(rows, "c3", Hex::black, Hex::save_bridge);
  const auto counts = first_moves(h, 400);
  const int d2 = counts[*h.parse_move("d2")], b4 = counts[*h.parse_move("b4")];
  EXPECT_EQ(d2 + b4, 400);
  EXPECT_GT(d2, 100);
  EXPECT_GT(b4, 100);
}

// Replays a playout's trace on the position: every move lands on an empty
// cell, and the board they make is won by the playout's winner. A playout
// with knowledge reports its moves in the order played, alternating from the
// side to move; with early_win the winner's last stone is the one that
// connected (the trace stops there), without it the board is full. A random
// fill (no knowledge) reports who took each cell, in no order.
void check_playout(const Hex& h, std::uint64_t seed) {
  Rng rng(seed);
  Trace trace;
  const Player winner = h.playout(rng, trace);
  Hex replay = h;
  replay.set_knowledge(0);
  Player mover = h.to_move();
  const bool ordered = h.knowledge() != 0;
  bool won_before_end = false;
  for (const auto& e : trace.entries()) {
    if (ordered) ASSERT_EQ(e.player, mover);
    ASSERT_LT(e.index, h.size() * h.size());
    ASSERT_EQ(replay.stone(e.index), Hex::empty);
    won_before_end = won_before_end || replay.terminal();
    replay.place(e.index, e.player);
    mover = other(mover);
  }
  if (h.knowledge() & Hex::early_win) {
    ASSERT_FALSE(won_before_end) << "the playout went on after a win\n" << replay.board_text();
    ASSERT_TRUE(replay.terminal()) << replay.board_text();
    EXPECT_EQ(trace.entries().back().player, winner);
  } else {
    EXPECT_EQ(replay.moves_played(), h.size() * h.size());
  }
  EXPECT_TRUE(reference_connects(replay, winner)) << replay.board_text();
  EXPECT_FALSE(reference_connects(replay, other(winner))) << replay.board_text();
}

TEST(HexKnowledge, PlayoutsEndWithTheirWinnerConnected) {
  Rng rng(21);
  for (std::uint8_t flags = 0; flags <= Hex::all_knowledge; ++flags) {
    for (int n : {1, 2, 3, 5, 8, 11, 19}) {
      for (int i = 0; i < 60; ++i) {
        Hex h = random_game(n, static_cast<int>(rng.below(static_cast<std::uint32_t>(n * n))), rng);
        if (h.terminal()) continue;
        if (rng.below(4) == 0) h.set_to_move(other(h.to_move()));
        h.set_knowledge(flags);
        SCOPED_TRACE(testing::Message() << "knowledge " << int(flags) << "\n" << h.board_text());
        check_playout(h, rng());
        // The trace-less playout plays the same game.
        Rng a(i), b(i);
        Trace trace;
        EXPECT_EQ(h.playout(a), h.playout(b, trace));
      }
    }
  }
}

TEST(HexKnowledge, EarlyWinStopsAtTheConnectingStone) {
  // Black's column c1-c4 lacks only c5: a playout in which black takes c5
  // first ends there, one move long; without early_win it fills the board.
  const Rows rows = {"..X..", "..X..", "..X..", "..X..", "....."};
  for (Player owner : {Hex::black, Hex::white}) {
    Hex h = board(owner == Hex::black ? rows : mirror(rows), owner);
    const auto gap = *h.parse_move(owner == Hex::black ? "c5" : "e3");
    for (std::uint8_t flags : {std::uint8_t{Hex::early_win}, std::uint8_t{Hex::all_knowledge},
                               std::uint8_t{Hex::save_bridge | Hex::save_edge}, std::uint8_t{0}}) {
      h.set_knowledge(flags);
      Rng rng(4);
      Trace trace;
      int one_move = 0, gap_first = 0, full = 0;
      for (int i = 0; i < 300; ++i) {
        trace.clear();
        const Player winner = h.playout(rng, trace);
        full += trace.entries().size() == 21;
        if (trace.entries()[0].index != gap) continue;
        ++gap_first;
        EXPECT_EQ(winner, owner);
        one_move += trace.entries().size() == 1;
      }
      if (flags & Hex::early_win) {
        ASSERT_GT(gap_first, 0);
        EXPECT_EQ(one_move, gap_first);
        EXPECT_LT(full, 300);
      } else {
        EXPECT_EQ(one_move, 0);
        EXPECT_EQ(full, 300);
      }
    }
  }
}

TEST(HexKnowledge, PlayoutsLeaveTheStateUnchanged) {
  Rng rng(5);
  Hex h = random_game(11, 30, rng);
  h.set_knowledge(Hex::all_knowledge);
  std::array<unsigned char, sizeof(Hex)> before;
  std::memcpy(before.data(), &h, sizeof(Hex));
  Trace trace;
  for (int i = 0; i < 100; ++i) {
    h.playout(rng);
    trace.clear();
    h.playout(rng, trace);
  }
  EXPECT_EQ(std::memcmp(before.data(), &h, sizeof(Hex)), 0);
}

TEST(HexKnowledge, FlagsTravelWithTheState) {
  Hex h(7);
  h.set_knowledge(Hex::save_bridge | Hex::early_win);
  h.play(3);
  Hex copy = h;
  copy.play(10);
  EXPECT_EQ(copy.knowledge(), Hex::save_bridge | Hex::early_win);
  EXPECT_EQ(copy.last_move(), 10);
  h.set_knowledge(0xff);
  EXPECT_EQ(h.knowledge(), Hex::all_knowledge);
  EXPECT_EQ(Hex(5).last_move(), Hex::no_move);
}

TEST(HexKnowledge, AmafTraceOfARandomFillCoversEveryEmptyCell) {
  Rng rng(8);
  const Hex h = random_game(7, 12, rng);
  ASSERT_FALSE(h.terminal());
  Trace trace;
  h.playout(rng, trace);
  std::set<int> cells;
  int mover = 0;
  for (const auto& e : trace.entries()) {
    EXPECT_EQ(h.stone(e.index), Hex::empty);
    cells.insert(e.index);
    mover += e.player == h.to_move();
  }
  const int open = 49 - h.moves_played();
  EXPECT_EQ(static_cast<int>(cells.size()), open);
  EXPECT_EQ(static_cast<int>(trace.entries().size()), open);
  EXPECT_EQ(mover, (open + 1) / 2);
}

TEST(HexKnowledge, PriorsFromPatterns) {
  // White walls in a3 (a2, b2, b3, a4 and its own edge); black's d2 makes
  // bridges from c4 and e3; e5 is an edge cell with nothing near it; c3 is
  // none of these.
  const Hex h = after_last_move({".....", "OO.X.", ".O...", "O....", "....."}, "a4", Hex::black, 0);
  Hex::Move moves[Hex::max_moves];
  const std::size_t n = h.legal_moves(moves);
  Prior priors[Hex::max_moves];
  h.priors(std::span<const Hex::Move>(moves, n), std::span<Prior>(priors, n));
  auto prior_of = [&](const char* name) {
    const auto m = *h.parse_move(name);
    for (std::size_t i = 0; i < n; ++i)
      if (moves[i] == m) return priors[i];
    ADD_FAILURE() << name << " is not a legal move";
    return Prior{};
  };
  EXPECT_FLOAT_EQ(prior_of("a3").value, 0.1f);
  EXPECT_FLOAT_EQ(prior_of("c4").value, 0.65f);
  EXPECT_FLOAT_EQ(prior_of("e3").value, 0.65f);
  EXPECT_FLOAT_EQ(prior_of("e5").value, 0.35f);
  EXPECT_FLOAT_EQ(prior_of("c3").value, 0.5f);
  for (std::size_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(priors[i].weight, 1.0f);
  // Right after white's intrusion into c2-d3, restoring it at c3 is the best prior.
  const Hex intruded = after_last_move(intruded_bridge, "d2", Hex::black, 0);
  const std::size_t m = intruded.legal_moves(moves);
  intruded.priors(std::span<const Hex::Move>(moves, m), std::span<Prior>(priors, m));
  const auto best = std::max_element(priors, priors + m, [](auto& x, auto& y) { return x.value < y.value; });
  EXPECT_EQ(intruded.move_name(moves[best - priors]), "c3");
  EXPECT_FLOAT_EQ(best->value, 0.85f);
}

TEST(HexKnowledge, StonesAfterTheEndKeepTheWinner) {
  Hex h = board({"X..", "X..", "..."});
  h.play(cell(h, 2, 0));
  ASSERT_TRUE(h.terminal());
  h.place(cell(h, 0, 1), Hex::white);
  h.place(cell(h, 1, 1), Hex::white);
  h.place(cell(h, 2, 1), Hex::white);
  EXPECT_EQ(h.winner(), Hex::black);
  EXPECT_EQ(h.hash(), recomputed_hash(h));
}

TEST(HexKnowledge, MirrorIsTheLongDiagonal) {
  const Hex h(11);
  EXPECT_EQ(h.move_name(h.mirror(*h.parse_move("c5"))), "e3");
  EXPECT_EQ(h.move_name(h.mirror(*h.parse_move("a1"))), "a1");
  EXPECT_EQ(h.move_name(h.mirror(*h.parse_move("k1"))), "a11");
  for (int m = 0; m < 121; ++m) EXPECT_EQ(h.mirror(h.mirror(static_cast<Hex::Move>(m))), m);
}

}  // namespace
}  // namespace rdmx::mcts
