// What a user writes to search a game with rdmx's MCTS: a problem
// specification, the only game-specific code the framework needs (no
// communication, memory management or tree code). The framework copies
// states between threads and processes as plain bytes (a new child travels
// inside a call_buffer), so a state must be trivially copyable and
// self-contained: no pointers, no heap.
//
// Two optional parts let the framework use what a game knows (docs/mcts.md,
// "What the framework offers every game"):
//  - AmafGame: moves map to small indices and a playout reports the moves it
//    played, which feeds AMAF/RAVE statistics in the tree;
//  - PriorGame: a prior value for each move of a position, which the tree
//    counts as games already played through the move.
#pragma once
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

namespace rdmx::mcts {

// Two players, 0 moves first. Games with more players or draws are outside
// this framework's value model (a rollout is a win or a loss).
using Player = std::uint8_t;
constexpr Player other(Player p) noexcept { return static_cast<Player>(p ^ 1u); }

// xoshiro256**: fast, small state, good enough for random playouts.
class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0x9E3779B97F4A7C15ull) noexcept {
    for (auto& w : s_) {  // splitmix64 expands the seed
      seed += 0x9E3779B97F4A7C15ull;
      std::uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      w = z ^ (z >> 31);
    }
  }
  std::uint64_t operator()() noexcept {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, n), n > 0 (Lemire's multiply-shift; the bias is < n / 2^64).
  std::uint32_t below(std::uint32_t n) noexcept {
    return static_cast<std::uint32_t>(((*this)() >> 32) * n >> 32);
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

// G::Move: trivially copyable move. G::max_moves: a bound on legal moves in
// any state of G (sizes per-node arrays).
template <class G>
concept Game = std::is_trivially_copyable_v<G> && std::is_trivially_copyable_v<typename G::Move> &&
               std::equality_comparable<typename G::Move> &&
               requires(const G& state, G& mutable_state, typename G::Move move, std::span<typename G::Move> out,
                        Rng& rng) {
                 { G::max_moves } -> std::convertible_to<std::size_t>;
                 { state.to_move() } -> std::same_as<Player>;
                 // Writes the legal moves into out (size >= max_moves); returns how many.
                 { state.legal_moves(out) } -> std::same_as<std::size_t>;
                 { mutable_state.play(move) } -> std::same_as<void>;  // a legal move
                 { state.terminal() } -> std::same_as<bool>;
                 { state.winner() } -> std::same_as<Player>;  // only when terminal()
                 { state.hash() } -> std::same_as<std::uint64_t>;  // Zobrist hash of the position
                 // Plays random moves to the end of the game from this state
                 // (left unchanged) and returns the winner.
                 { state.playout(rng) } -> std::same_as<Player>;
               };

// What one playout played: each move index once, with the player who played
// it first (AMAF, "all moves as first"). A game whose moves repeat reports
// only a move's first play.
template <std::size_t N>
class PlayoutTrace {
 public:
  struct Entry {
    std::uint16_t index;
    Player player;
  };
  void clear() noexcept { count_ = 0; }
  void played(std::uint16_t index, Player player) noexcept { entries_[count_++] = {index, player}; }
  std::span<const Entry> entries() const noexcept { return {entries_.data(), count_}; }

 private:
  std::size_t count_ = 0;
  std::array<Entry, N> entries_;
};

// G::move_space: move indices are below it; G::move_index(move) gives one.
template <class G>
concept AmafGame = Game<G> && requires(const G& state, typename G::Move move, Rng& rng,
                                       PlayoutTrace<G::move_space>& trace) {
  { G::move_index(move) } -> std::same_as<std::uint16_t>;
  // As playout(rng), reporting every move it plays to trace (empty on entry).
  { state.playout(rng, trace) } -> std::same_as<Player>;
};

// A move's prior: how good it looks (a win rate for the player to move) and
// how much to trust that, in units of SearchOptions::prior_games (0: none).
struct Prior {
  float value = 0.5f;
  float weight = 0;
};

template <class G>
concept PriorGame = Game<G> && requires(const G& state, std::span<const typename G::Move> moves, std::span<Prior> out) {
  // One prior per move of this position (moves are legal; out.size() == moves.size()).
  { state.priors(moves, out) } -> std::same_as<void>;
};

}  // namespace rdmx::mcts
