// The game of Hex on an n x n rhombus of hexagonal cells (1 <= n <= 19).
// Black (player 0) moves first and connects the top row to the bottom row;
// white (player 1) connects the left column to the right column. The cell at
// row r, column c is the move r * n + c, named as in HexGui: column letter
// then row number from 1 ("a1" is the top-left corner, "c5" is column 3,
// row 5). The neighbours of (r, c) are (r-1, c), (r-1, c+1), (r, c-1),
// (r, c+1), (r+1, c-1) and (r+1, c).
//
// Hex knowledge (docs/mcts-hex.md, "What Hex knows"), each part switched by a
// flag the state carries, so that it travels with every state the search
// ships between processes:
//  - playouts that answer an intrusion into a bridge (two stones of the
//    mover with two empty cells between them: the opponent took one, the
//    mover takes the other), and into a bridge to the mover's edge (a stone
//    on the second row and its two cells on the first);
//  - playouts that stop as soon as a chain connects (union-find over the
//    stones, the edges as four sets);
//  - priors from simple patterns for the tree (Hex::priors).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "mcts/game.hpp"

namespace rdmx::mcts {

namespace hex_detail {
// Zobrist keys from splitmix64, fixed at compile time so that every process
// hashes alike: key 2 * cell + colour for a stone, the last one for white to move.
consteval std::array<std::uint64_t, 2 * 361 + 1> zobrist_keys() {
  std::array<std::uint64_t, 2 * 361 + 1> keys{};
  std::uint64_t seed = 0x243F6A8885A308D3ull;
  for (auto& key : keys) {
    seed += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    key = z ^ (z >> 31);
  }
  return keys;
}
}  // namespace hex_detail

class Hex {
 public:
  using Move = std::uint16_t;
  static constexpr int max_size = 19;
  static constexpr std::size_t max_moves = max_size * max_size;
  static constexpr std::size_t move_space = max_moves;  // AMAF: a move is its own index
  static constexpr std::uint16_t move_index(Move move) noexcept { return move; }
  static constexpr Move no_move = 0xffff;

  // What the playouts know, as flags (0: uniformly random fills, one
  // connectivity check at the end).
  enum Knowledge : std::uint8_t {
    save_bridge = 1,  // answer an intrusion into a bridge between two stones
    save_edge = 2,    // answer an intrusion into a bridge to the mover's edge
    early_win = 4,    // stop the playout when a chain connects (union-find)
    all_knowledge = save_bridge | save_edge | early_win,
  };
  static constexpr Player black = 0;
  static constexpr Player white = 1;
  static constexpr Player empty = 2;  // stone() of an empty cell

  // Throws std::invalid_argument unless 1 <= size <= max_size.
  explicit Hex(int size = 11);

  int size() const noexcept { return size_; }
  std::uint8_t knowledge() const noexcept { return knowledge_; }
  void set_knowledge(std::uint8_t flags) noexcept { knowledge_ = flags & all_knowledge; }
  Player to_move() const noexcept { return to_move_; }
  Move last_move() const noexcept { return last_; }  // no_move before the first
  Player stone(Move move) const noexcept { return cells_[move]; }
  int moves_played() const noexcept { return moves_; }  // stones on the board
  bool terminal() const noexcept { return winner_ != empty; }
  Player winner() const noexcept { return winner_; }
  std::uint64_t hash() const noexcept { return hash_; }

  // The empty cells, or none once the game is over.
  std::size_t legal_moves(std::span<Move> out) const noexcept;
  // Places a stone for the player to move on an empty cell.
  void play(Move move) noexcept { place(move, to_move_); }
  // Places a stone of either colour on an empty cell (set-up moves); then the
  // other colour is to move. A finished game keeps its winner: stones placed
  // after the end (a GUI or referee may send them) cannot make a second one.
  void place(Move move, Player player) noexcept;
  void set_to_move(Player player) noexcept;

  // The cell across the long diagonal: (r, c) -> (c, r). The swap rule's
  // "swap-pieces" moves the first stone there and gives it the other colour.
  Move mirror(Move move) const noexcept { return static_cast<Move>(move % size_ * size_ + move / size_); }

  // Fills every empty cell at random, colouring them alternately starting
  // with the side to move, as a random game played to the very end would.
  Hex random_fill(Rng& rng) const noexcept;
  // A playout to the end as knowledge() says; the winner.
  Player playout(Rng& rng) const noexcept;
  // The same, reporting every move it plays to trace (AMAF, game.hpp).
  Player playout(Rng& rng, PlayoutTrace<move_space>& trace) const noexcept;
  // Priors for the tree (game.hpp), from patterns around each move.
  void priors(std::span<const Move> moves, std::span<Prior> out) const noexcept;

  std::string move_name(Move move) const;
  // Case-insensitive; std::nullopt for anything but a cell of this board.
  std::optional<Move> parse_move(std::string_view text) const;
  // The rhombus, one line per row: '.' empty, 'X' black, 'O' white.
  std::string board_text() const;

  static constexpr std::uint64_t stone_key(Move move, Player player) noexcept { return keys_[2 * move + player]; }
  static constexpr std::uint64_t white_to_move_key() noexcept { return keys_[2 * max_moves]; }

 private:
  // Whether a flood fill over player's stones from the seed stones reaches both of player's edges.
  bool connects(Player player, std::span<const Move> seeds) const noexcept;
  // The playout with knowledge (hex.cpp); Trace gets each move played.
  template <class Trace>
  Player knowledge_playout(Rng& rng, Trace& trace) const noexcept;
  template <bool Replies, bool UnionFind, class Trace>
  Player knowledge_playout(Rng& rng, Trace& trace) const noexcept;

  static constexpr auto keys_ = hex_detail::zobrist_keys();
  static_assert(keys_.size() == 2 * max_moves + 1);

  std::uint64_t hash_ = 0;
  std::array<Player, max_moves> cells_;
  std::uint16_t moves_ = 0;
  Move last_ = no_move;
  std::uint8_t size_;
  Player to_move_ = black;
  Player winner_ = empty;  // cached so that terminal() and winner() are O(1)
  std::uint8_t knowledge_ = 0;
};

static_assert(Game<Hex>);
static_assert(AmafGame<Hex>);
static_assert(PriorGame<Hex>);
static_assert(sizeof(Hex) <= 384);

}  // namespace rdmx::mcts
