#include "mcts/hex.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <utility>

namespace rdmx::mcts {

namespace {
// The six neighbours of (r, c), in order around the cell: each is adjacent to the next.
constexpr int neighbour_offsets[6][2] = {{-1, 0}, {-1, 1}, {0, 1}, {1, 0}, {1, -1}, {0, -1}};

// The board the playouts and priors work on: one ring of cells around it
// that carry the edges' colours, so that neighbours need no bounds checks and
// an edge looks like a row of the mover's stones (a bridge to the edge is
// then a bridge like any other). The four corner cells of the ring belong
// to neither player.
constexpr int padded_cells = (Hex::max_size + 2) * (Hex::max_size + 2);
constexpr std::uint8_t off_board = 3;

struct Geometry {
  int width = 0;  // n + 2
  // Neighbour offsets in order around a cell: each is adjacent to the next.
  std::array<int, 6> step{};
  std::array<std::uint16_t, Hex::max_moves> pad{};  // board cell -> padded index
  std::array<std::uint16_t, padded_cells> cell{};   // padded index -> board cell
  std::array<std::uint8_t, padded_cells> colour{};  // the ring's colours; board cells empty
  std::array<std::uint8_t, padded_cells> on_board{};  // bit d: the neighbour at step d is a board cell
  // Per player: 1 if the cell is on the player's first edge, 2 on the second.
  std::array<std::array<std::uint8_t, padded_cells>, 2> edges{};
};

const Geometry& geometry(int n) {
  static const auto table = [] {
    auto t = std::make_unique<std::array<Geometry, Hex::max_size + 1>>();
    for (int size = 1; size <= Hex::max_size; ++size) {
      Geometry& g = (*t)[size];
      const int w = size + 2;
      g.width = w;
      g.step = {-w, -w + 1, 1, w, w - 1, -1};
      auto inside = [&](int r, int c) { return r >= 1 && r <= size && c >= 1 && c <= size; };
      for (int r = 0; r < w; ++r)
        for (int c = 0; c < w; ++c) {
          const int p = r * w + c;
          const bool row_out = r == 0 || r == size + 1, col_out = c == 0 || c == size + 1;
          if (row_out && col_out) {
            g.colour[p] = off_board;
          } else if (row_out) {
            g.colour[p] = Hex::black;
          } else if (col_out) {
            g.colour[p] = Hex::white;
          } else {
            g.colour[p] = Hex::empty;
            const int board = (r - 1) * size + (c - 1);
            g.pad[board] = static_cast<std::uint16_t>(p);
            g.cell[p] = static_cast<std::uint16_t>(board);
            g.edges[Hex::black][p] = static_cast<std::uint8_t>((r == 1 ? 1 : 0) | (r == size ? 2 : 0));
            g.edges[Hex::white][p] = static_cast<std::uint8_t>((c == 1 ? 1 : 0) | (c == size ? 2 : 0));
            for (int d = 0; d < 6; ++d)
              if (inside(r + neighbour_offsets[d][0], c + neighbour_offsets[d][1]))
                g.on_board[p] |= static_cast<std::uint8_t>(1u << d);
          }
        }
    }
    return t;
  }();
  return (*table)[n];
}

using PaddedColours = std::array<std::uint8_t, padded_cells>;

// The playout's chains, as union-find over the board cells that hold
// stones; each root knows which of its player's edges the chain touches.
struct Chains {
  std::array<std::uint16_t, padded_cells> parent;
  std::array<std::uint8_t, padded_cells> edges;

  std::uint16_t find(std::uint16_t x) noexcept {
    while (parent[x] != x) {
      parent[x] = parent[parent[x]];  // path halving
      x = parent[x];
    }
    return x;
  }
  // A stone at p joins the chains of its neighbours in `joins` (bits by
  // step); returns the edges its chain now touches (3: both, a win).
  std::uint8_t add(const Geometry& g, std::uint16_t p, Player player, unsigned joins) noexcept {
    parent[p] = p;
    std::uint8_t touched = g.edges[player][p];
    while (joins != 0) {
      const int d = __builtin_ctz(joins);
      joins &= joins - 1;
      const std::uint16_t root = find(static_cast<std::uint16_t>(p + g.step[d]));
      if (root == p) continue;
      parent[root] = p;
      touched |= edges[root];
    }
    edges[p] = touched;
    return touched;
  }
};

// Bits by step of the neighbours of p that hold `colour` (edges included).
unsigned neighbours_of(const Geometry& g, const PaddedColours& colour, int p, std::uint8_t wanted) noexcept {
  unsigned mask = 0;
  for (int d = 0; d < 6; ++d) mask |= unsigned{colour[p + g.step[d]] == wanted} << d;
  return mask;
}

// The cells that restore a bridge of `mover` after the opponent's stone at
// `intruder` (padded) took one of its two cells. Going round the intruder,
// the other cell is an empty neighbour whose neighbours before and after it
// (both also the intruder's) are mover's: stones (save_bridge) or, for a
// stone on the second row, mover's edge (save_edge). Returns how many it
// wrote to out.
// `mine` and `empty_cells`: bits by step of the intruder's neighbours that
// are mover's (edges included) and empty.
unsigned bridge_reply_steps(unsigned mine, unsigned empty_cells) noexcept {
  const unsigned before = ((mine << 1) | (mine >> 5)) & 63u;  // bit d: the neighbour at d - 1 is mover's
  const unsigned after = ((mine >> 1) | (mine << 5)) & 63u;   // bit d: the neighbour at d + 1 is mover's
  return empty_cells & before & after;
}

int bridge_replies(const Geometry& g, std::uint16_t intruder, unsigned steps, std::uint8_t knowledge,
                   std::uint16_t (&out)[6]) noexcept {
  int count = 0;
  while (steps != 0) {
    const int d = __builtin_ctz(steps);
    steps &= steps - 1;
    const int a = intruder + g.step[(d + 5) % 6], c = intruder + g.step[(d + 1) % 6];
    const bool to_edge = g.colour[a] != Hex::empty || g.colour[c] != Hex::empty;
    if (knowledge & (to_edge ? Hex::save_edge : Hex::save_bridge))
      out[count++] = static_cast<std::uint16_t>(intruder + g.step[d]);
  }
  return count;
}

// Whether black connects top to bottom on a padded board (marks what it visits).
bool black_connects(const Geometry& g, int n, PaddedColours& colour) noexcept {
  constexpr std::uint8_t seen = off_board + 1;
  // The ring above the board is black and its cells have no row above them:
  // off the search. The ring below is only ever next to the bottom row,
  // where the search has already succeeded; the sides are white.
  std::memset(colour.data() + 1, off_board, static_cast<std::size_t>(n));
  std::array<std::uint16_t, Hex::max_moves + 1> stack;  // one spare: a neighbour is written before it counts
  std::size_t top = 0;
  for (int c = 0; c < n; ++c)
    if (colour[g.pad[c]] == Hex::black) {
      colour[g.pad[c]] = seen;
      stack[top++] = g.pad[c];
    }
  const int last_row = n * g.width;  // padded indices from here are on the bottom row or below
  while (top > 0) {
    const int p = stack[--top];
    if (p >= last_row) return true;
    // Half the neighbours of a cell on a full board are black, at random:
    // pushing each one without a branch beats mispredicting half of them.
    for (int d = 0; d < 6; ++d) {
      const int q = p + g.step[d];
      const bool black = colour[q] == Hex::black;
      stack[top] = static_cast<std::uint16_t>(q);
      top += black;
      colour[q] = black ? seen : colour[q];
    }
  }
  return false;
}

struct NoTrace {
  void played(std::uint16_t, Player) noexcept {}
};
}  // namespace

Hex::Hex(int size) {
  if (size < 1 || size > max_size)
    throw std::invalid_argument("Hex board size must be between 1 and " + std::to_string(max_size) + ", not " +
                                std::to_string(size));
  size_ = static_cast<std::uint8_t>(size);
  cells_.fill(empty);
}

std::size_t Hex::legal_moves(std::span<Move> out) const noexcept {
  if (terminal()) return 0;
  std::size_t count = 0;
  for (int cell = 0; cell < size_ * size_; ++cell)
    if (cells_[cell] == empty) out[count++] = static_cast<Move>(cell);
  return count;
}

void Hex::place(Move move, Player player) noexcept {
  assert(move < size_ * size_ && cells_[move] == empty);
  cells_[move] = player;
  hash_ ^= stone_key(move, player);
  ++moves_;
  last_ = move;
  // Only the group of the new stone changed, so only it can have made a winner.
  if (!terminal() && connects(player, {&move, 1})) winner_ = player;
  set_to_move(other(player));
}

void Hex::set_to_move(Player player) noexcept {
  if (player != to_move_) hash_ ^= white_to_move_key();
  to_move_ = player;
}

Hex Hex::random_fill(Rng& rng) const noexcept {
  Hex full = *this;
  std::array<Move, max_moves> open;
  std::uint32_t count = 0;
  for (int cell = 0; cell < size_ * size_; ++cell)
    if (cells_[cell] == empty) open[count++] = static_cast<Move>(cell);
  // Colouring a random order alternately gives the mover a uniformly random
  // ceil(count / 2) of the cells, so a partial Fisher-Yates shuffle suffices.
  const std::uint32_t mine = (count + 1) / 2;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (i < mine) std::swap(open[i], open[i + rng.below(count - i)]);
    const Player player = i < mine ? to_move_ : other(to_move_);
    full.cells_[open[i]] = player;
    full.hash_ ^= stone_key(open[i], player);
  }
  full.moves_ = static_cast<std::uint16_t>(moves_ + count);
  if (count % 2 == 1) full.set_to_move(other(to_move_));
  // A full board has exactly one winner: black if black connects top to bottom, else white.
  std::array<Move, max_size> top;
  std::size_t seeds = 0;
  for (int col = 0; col < size_; ++col)
    if (full.cells_[col] == black) top[seeds++] = static_cast<Move>(col);
  full.winner_ = full.connects(black, {top.data(), seeds}) ? black : white;
  return full;
}

Player Hex::playout(Rng& rng) const noexcept {
  if (terminal()) return winner_;
  if (knowledge_ == 0) return random_fill(rng).winner_;
  NoTrace none;
  return knowledge_playout(rng, none);
}

Player Hex::playout(Rng& rng, PlayoutTrace<move_space>& trace) const noexcept {
  if (terminal()) return winner_;
  if (knowledge_ != 0) return knowledge_playout(rng, trace);
  // A random fill plays every empty cell once, in an order that does not
  // matter to AMAF: who took each cell is all it records.
  const Hex full = random_fill(rng);
  for (int cell = 0; cell < size_ * size_; ++cell)
    if (cells_[cell] == empty) trace.played(static_cast<std::uint16_t>(cell), full.cells_[cell]);
  return full.winner_;
}

template <class Trace>
Player Hex::knowledge_playout(Rng& rng, Trace& trace) const noexcept {
  // Each combination of the flags gets its own loop, with nothing in it
  // that the others need.
  switch (knowledge_ & all_knowledge) {
    case 0: break;
    case early_win: return knowledge_playout<false, true>(rng, trace);
    default: return knowledge_ & early_win ? knowledge_playout<true, true>(rng, trace)
                                           : knowledge_playout<true, false>(rng, trace);
  }
  return knowledge_playout<false, false>(rng, trace);
}

template <bool Replies, bool UnionFind, class Trace>
Player Hex::knowledge_playout(Rng& rng, Trace& trace) const noexcept {
  const Geometry& g = geometry(size_);
  const int n = size_;
  PaddedColours colour;
  Chains chains;
  std::array<std::uint16_t, max_moves> open;  // the empty cells (padded), in no order
  std::array<std::uint16_t, padded_cells> where;  // each empty cell's place in open
  std::memcpy(colour.data(), g.colour.data(), static_cast<std::size_t>(g.width * g.width));
  std::uint32_t count = 0;
  for (int c = 0; c < n * n; ++c) {
    const std::uint16_t p = g.pad[c];
    const Player stone = cells_[c];
    colour[p] = stone;
    // Written for every cell, kept for the empty ones: no branch to mispredict.
    where[p] = static_cast<std::uint16_t>(count);
    open[count] = p;
    count += stone == empty;
    if (UnionFind && stone != empty) {
      // Row by row, the neighbours before a cell are those at steps 0, 1 and 5.
      constexpr unsigned earlier = 1u << 0 | 1u << 1 | 1u << 5;
      chains.add(g, p, stone, neighbours_of(g, colour, p, stone) & g.on_board[p] & earlier);
    }
  }
  Player mover = to_move_;
  // Where the mover may answer a bridge intrusion: around the opponent's last stone.
  std::uint16_t last = 0;
  unsigned reply_steps = 0;
  if (Replies && last_ != no_move && cells_[last_] == other(mover)) {
    last = g.pad[last_];
    reply_steps = bridge_reply_steps(neighbours_of(g, colour, last, mover), neighbours_of(g, colour, last, empty));
  }
  while (count > 0) {
    std::uint16_t cell = 0;
    if (reply_steps != 0) {
      std::uint16_t candidates[6];
      const int k = bridge_replies(g, last, reply_steps, knowledge_, candidates);
      if (k > 0) cell = candidates[k == 1 ? 0 : rng.below(static_cast<std::uint32_t>(k))];
    }
    const std::uint32_t i = cell != 0 ? where[cell] : rng.below(count);
    cell = open[i];
    open[i] = open[--count];
    where[open[i]] = static_cast<std::uint16_t>(i);
    colour[cell] = mover;
    trace.played(g.cell[cell], mover);
    // One pass over the new stone's neighbours serves both its chain and
    // the opponent's reply to it.
    unsigned same = 0, theirs = 0, empty_cells = 0;
    for (int d = 0; d < 6; ++d) {
      const std::uint8_t c = colour[cell + g.step[d]];
      if constexpr (UnionFind) same |= unsigned{c == mover} << d;
      if constexpr (Replies) {
        theirs |= unsigned{c == other(mover)} << d;
        empty_cells |= unsigned{c == empty} << d;
      }
    }
    if constexpr (UnionFind)
      if (chains.add(g, cell, mover, same & g.on_board[cell]) == 3) return mover;
    last = cell;
    if constexpr (Replies) reply_steps = bridge_reply_steps(theirs, empty_cells);
    mover = other(mover);
  }
  // A full board has exactly one winner.
  return black_connects(g, n, colour) ? black : white;
}

void Hex::priors(std::span<const Move> moves, std::span<Prior> out) const noexcept {
  const Geometry& g = geometry(size_);
  const int n = size_;
  PaddedColours colour;
  std::memcpy(colour.data(), g.colour.data(), static_cast<std::size_t>(g.width * g.width));
  for (int c = 0; c < n * n; ++c) colour[g.pad[c]] = cells_[c];
  const Player mover = to_move_;
  std::uint16_t replies[6];
  int reply_count = 0;
  if (last_ != no_move && cells_[last_] == other(mover)) {
    const std::uint16_t last = g.pad[last_];
    const unsigned steps =
        bridge_reply_steps(neighbours_of(g, colour, last, mover), neighbours_of(g, colour, last, empty));
    reply_count = bridge_replies(g, last, steps, save_bridge | save_edge, replies);
  }
  for (std::size_t i = 0; i < moves.size(); ++i) {
    const int p = g.pad[moves[i]];
    Prior prior{0.5f, 1.0f};
    int mine = 0, theirs = 0, edge = 0, black_side = 0, white_side = 0;
    for (int d = 0; d < 6; ++d) {
      const int q = p + g.step[d];
      const std::uint8_t here = colour[q];
      if (g.colour[q] != empty) ++edge;
      else if (here == mover) ++mine;
      else if (here != empty) ++theirs;
      black_side += here == black || here == off_board;
      white_side += here == white || here == off_board;
    }
    bool bridge = false;  // a and b empty are on the board, so partner is at most on the ring
    for (int d = 0; d < 6 && !bridge; ++d) {
      const int a = p + g.step[d], b = p + g.step[(d + 1) % 6];
      const int partner = a + g.step[(d + 1) % 6];
      bridge = colour[a] == empty && colour[b] == empty && colour[partner] == mover && g.colour[partner] == empty;
    }
    if (std::find(replies, replies + reply_count, p) != replies + reply_count) {
      prior.value = 0.85f;  // restores a bridge the opponent just broke into
    } else if (black_side == 6 || white_side == 6) {
      prior.value = 0.1f;  // walled in by one colour: taking it changes nothing
    } else if (bridge) {
      prior.value = 0.65f;  // a bridge from one of the mover's stones
    } else if (edge > 0 && mine == 0 && theirs == 0) {
      prior.value = 0.35f;  // an edge cell with no stone next to it
    }
    out[i] = prior;
  }
}

bool Hex::connects(Player player, std::span<const Move> seeds) const noexcept {
  const int n = size_;
  std::array<bool, max_moves> seen{};
  std::array<Move, max_moves> stack;
  std::size_t top = 0;
  for (Move seed : seeds) {
    seen[seed] = true;
    stack[top++] = seed;
  }
  bool first_edge = false, second_edge = false;
  while (top > 0) {
    const int cell = stack[--top];
    const int row = cell / n, col = cell % n;
    const int across = player == black ? row : col;
    first_edge |= across == 0;
    second_edge |= across == n - 1;
    if (first_edge && second_edge) return true;
    for (const auto& [dr, dc] : neighbour_offsets) {
      const int r = row + dr, c = col + dc;
      if (r < 0 || r >= n || c < 0 || c >= n) continue;
      const int next = r * n + c;
      if (cells_[next] == player && !seen[next]) {
        seen[next] = true;
        stack[top++] = static_cast<Move>(next);
      }
    }
  }
  return false;
}

std::string Hex::move_name(Move move) const {
  return static_cast<char>('a' + move % size_) + std::to_string(move / size_ + 1);
}

std::optional<Hex::Move> Hex::parse_move(std::string_view text) const {
  if (text.size() < 2 || text.size() > 3) return std::nullopt;
  const char letter = text[0] >= 'A' && text[0] <= 'Z' ? static_cast<char>(text[0] - 'A' + 'a') : text[0];
  const int col = letter - 'a';
  if (col < 0 || col >= size_) return std::nullopt;
  int row = 0;
  for (char digit : text.substr(1)) {
    if (digit < '0' || digit > '9') return std::nullopt;
    row = row * 10 + (digit - '0');
  }
  if (text[1] == '0' || row < 1 || row > size_) return std::nullopt;  // "a01" is not a name either
  return static_cast<Move>((row - 1) * size_ + col);
}

std::string Hex::board_text() const {
  // Each row is shifted half a cell right of the one above, which draws the
  // rhombus with the neighbourhood of the hexagonal cells.
  std::string letters;
  for (int col = 0; col < size_; ++col) {
    if (col > 0) letters += ' ';
    letters += static_cast<char>('a' + col);
  }
  std::string text = "   " + letters + '\n';
  for (int row = 0; row < size_; ++row) {
    const std::string number = std::to_string(row + 1);
    text += std::string(static_cast<std::size_t>(row) + 2 - number.size(), ' ') + number + ' ';
    for (int col = 0; col < size_; ++col) {
      const Player p = cells_[row * size_ + col];
      text += p == black ? 'X' : p == white ? 'O' : '.';
      text += ' ';
    }
    text += number + '\n';
  }
  text += std::string(static_cast<std::size_t>(size_) + 3, ' ') + letters + '\n';
  return text;
}

}  // namespace rdmx::mcts
