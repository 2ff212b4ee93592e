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
  EXPECT_LE(sizeof(Hex), 376u);
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

}  // namespace
}  // namespace rdmx::mcts
