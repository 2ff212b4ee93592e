// The search tree shared by every MCTS variant: nodes, the per-child
// statistics that selection reads (Seriema 5.3.2: "each node has counters
// associated with each of its children"), UCB and its guided form (priors,
// RAVE), and the wait-free queue that hands leaves to simulating threads.
//
// A node lives in the memory of one process and is owned by one thread of
// it. Every field another thread may touch is atomic: the threads of a
// process work on their nodes concurrently (tree parallelism), and visit and
// win counters are updated with relaxed atomics (the virtual loss technique:
// visits are added on the way down, wins on the way back up).
#pragma once
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "mcts/game.hpp"
#include "rdmx/fabric/identity.hpp"

namespace rdmx::mcts {

template <Game G>
struct Node;

// Where a node lives: a pointer that is valid in its owner's process.
template <Game G>
struct NodeRef {
  Node<G>* node = nullptr;
  ThreadId owner;
  explicit operator bool() const noexcept { return node != nullptr; }
};

// One move out of a node, with the statistics of the child it leads to.
template <Game G>
struct Slot {
  enum Status : std::uint8_t { unclaimed, creating, ready };
  typename G::Move move{};
  std::atomic<std::uint8_t> status{unclaimed};
  std::atomic<bool> locked{false};  // guards deferred against the child's arrival
  std::uint16_t prior_visits = 0;   // games the prior counts as played through the move
  std::uint16_t prior_wins = 0;     // of them, won (both fixed when the slot is made)
  std::atomic<std::uint16_t> pending{0};  // rollouts through the slot not home yet (SelectionRule::tracks_pending)
  std::uint32_t deferred = 0;       // selections waiting for the child (Seriema's deferred selection)
  std::atomic<std::uint32_t> visits{0};
  std::atomic<std::uint32_t> wins{0};  // playouts won by the player choosing this move
  NodeRef<G> child;                    // set before status becomes ready

  void lock() noexcept {
    while (locked.exchange(true, std::memory_order_acquire))
      while (locked.load(std::memory_order_relaxed)) {
      }
  }
  void unlock() noexcept { locked.store(false, std::memory_order_release); }

  // Claims the slot for expansion: true for the one selection that makes the child.
  bool try_claim() noexcept {
    std::uint8_t expected = unclaimed;
    return status.load(std::memory_order_relaxed) == unclaimed &&
           status.compare_exchange_strong(expected, creating, std::memory_order_relaxed);
  }
  // A selection chose this slot: wait for the child if it is still being
  // created. Returns false when the selection was deferred (it resumes when
  // the child arrives, see attach).
  bool ready_or_defer() noexcept {
    if (status.load(std::memory_order_acquire) == ready) return true;
    lock();
    const bool now = status.load(std::memory_order_acquire) == ready;
    if (!now) ++deferred;
    unlock();
    return now;
  }
  // The child exists at `where`; returns how many deferred selections to resume there.
  std::uint32_t attach(NodeRef<G> where) noexcept {
    lock();
    child = where;
    status.store(ready, std::memory_order_release);
    const std::uint32_t resume = deferred;
    deferred = 0;
    unlock();
    return resume;
  }
};

// AMAF statistics of a slot in one word, so that one atomic add updates
// both: games in which the player to move played the move (high half) and
// of them, games that player won (low half).
struct Amaf {
  static constexpr std::uint64_t pack(std::uint32_t games, std::uint32_t won) noexcept {
    return std::uint64_t{games} << 32 | won;
  }
  static constexpr std::uint32_t games(std::uint64_t word) noexcept { return static_cast<std::uint32_t>(word >> 32); }
  static constexpr std::uint32_t won(std::uint64_t word) noexcept { return static_cast<std::uint32_t>(word); }
};

// A node's moves: the slots and, with RAVE, their AMAF words, in an array
// of their own: every backpropagation adds to most of them, and packed
// together they are a sixth of the cache lines the slots are.
template <Game G>
struct Children {
  Children(std::size_t n, bool amaf) : slots(n), amaf(amaf ? n : 0) {}
  std::vector<Slot<G>> slots;
  std::vector<std::atomic<std::uint64_t>> amaf;  // empty without RAVE
};

// How a node's children are made: RAVE statistics or not, and what a prior
// counts for (0: no priors).
struct Expansion {
  bool amaf = false;
  std::uint32_t prior_games = 0;
};

// The link a node waits in a SimulationQueue with.
struct QueueLink {
  std::atomic<QueueLink*> next{nullptr};
};

template <Game G>
struct Node : QueueLink {
  Node(const G& s, ThreadId own, NodeRef<G> up = {}, std::uint16_t up_slot = 0, std::uint16_t d = 0)
      : state(s), owner(own), parent(up), parent_slot(up_slot), depth(d) {}

  NodeRef<G> ref() noexcept { return {this, owner}; }

  const G state;
  const ThreadId owner;
  const NodeRef<G> parent;  // null for the root
  const std::uint16_t parent_slot;
  const std::uint16_t depth;  // moves from the root
  std::atomic<std::uint64_t> visits{0};
  std::atomic<std::uint32_t> next_untried{0};  // slots below it have been claimed for expansion
  std::atomic<Children<G>*> children{nullptr};  // made by the first selection through the node

  ~Node() { delete children.load(std::memory_order_relaxed); }

  // The node's moves, one slot per legal move in random order, created on
  // first use (most nodes stay leaves and never pay for them).
  Children<G>& expand(Rng& rng, const Expansion& how) {
    if (auto* c = children.load(std::memory_order_acquire)) return *c;
    typename G::Move moves[G::max_moves];
    const std::size_t n = state.legal_moves(moves);
    for (std::size_t i = n; i > 1; --i) std::swap(moves[i - 1], moves[rng.below(static_cast<std::uint32_t>(i))]);
    auto made = std::make_unique<Children<G>>(n, how.amaf);
    for (std::size_t i = 0; i < n; ++i) made->slots[i].move = moves[i];
    if constexpr (PriorGame<G>) {
      if (how.prior_games > 0) {
        Prior priors[G::max_moves];
        state.priors(std::span<const typename G::Move>(moves, n), std::span<Prior>(priors, n));
        for (std::size_t i = 0; i < n; ++i) {
          const double games = std::clamp(double(priors[i].weight) * how.prior_games, 0.0, 65535.0);
          made->slots[i].prior_visits = static_cast<std::uint16_t>(games + 0.5);
          made->slots[i].prior_wins =
              static_cast<std::uint16_t>(std::clamp(double(priors[i].value), 0.0, 1.0) * made->slots[i].prior_visits + 0.5);
        }
      }
    }
    Children<G>* expected = nullptr;
    if (children.compare_exchange_strong(expected, made.get(), std::memory_order_acq_rel)) return *made.release();
    return *expected;  // another thread was first
  }
  std::vector<Slot<G>>& slots() noexcept { return children.load(std::memory_order_acquire)->slots; }
  // Claims an unexpanded slot, or returns nullptr when all are claimed.
  Slot<G>* claim_untried(std::vector<Slot<G>>& s) noexcept {
    if (next_untried.load(std::memory_order_relaxed) >= s.size()) return nullptr;
    const std::uint32_t i = next_untried.fetch_add(1, std::memory_order_relaxed);
    return i < s.size() ? &s[i] : nullptr;
  }
};

// How selection scores a move (SearchOptions holds the settings).
struct SelectionRule {
  double c = 0.8;                  // exploration constant
  std::uint32_t playouts = 16;     // games per rollout
  // Rollouts' worth of losses a rollout in flight counts for: 1 is the
  // visits added on the way down; 0 none; more pushes other threads away harder.
  std::uint32_t virtual_loss = 1;
  bool rave = false;               // blend in the AMAF value
  double rave_equivalence = 1000;  // games at which a move's own value and its AMAF value weigh alike
  double first_play = 1.0;         // the value of a move with no games, no prior and no AMAF
  bool guided = false;             // select_guided (RAVE or priors), not select_ucb
  // Slots count their rollouts in flight when selection needs them: a
  // virtual loss other than the visits added on the way down, or guided
  // selection, which applies the virtual loss to its blended value.
  bool tracks_pending() const noexcept { return virtual_loss != 1 || guided; }
};

// A move's visits as UCB counts them: with a virtual loss other than one
// rollout's, the rollouts in flight through it count for that many.
template <Game G>
double counted_visits(const Slot<G>& s, const SelectionRule& rule) noexcept {
  const double v = s.visits.load(std::memory_order_relaxed);
  if (rule.virtual_loss == 1) return v;
  const double in_flight = double(s.pending.load(std::memory_order_relaxed)) * rule.playouts;
  return std::max(0.0, v + (double(rule.virtual_loss) - 1.0) * in_flight);
}

// UCB over the claimed slots, counting virtual losses; nullptr if none has
// been visited yet (another thread claimed it but has not counted it).
template <Game G>
Slot<G>* select_ucb(Node<G>& node, std::vector<Slot<G>>& slots, const SelectionRule& rule) {
  const double log_n = std::log(static_cast<double>(node.visits.load(std::memory_order_relaxed)) + 1.0);
  Slot<G>* best = nullptr;
  double best_score = -1.0;
  for (auto& s : slots) {
    if (s.visits.load(std::memory_order_relaxed) == 0) continue;
    const double v = counted_visits(s, rule);
    const double score = v > 0 ? s.wins.load(std::memory_order_relaxed) / v + rule.c * std::sqrt(log_n / v)
                               : rule.first_play + rule.c * std::sqrt(log_n);
    if (score > best_score) best_score = score, best = &s;
  }
  return best;
}

// Selection over every move, claimed or not, when the node knows something
// of the moves it has not tried: their priors and AMAF values (RAVE, Gelly
// and Silver's blend of a move's own value with its all-moves-as-first
// value, weighted by how many games each rests on).
//
// A move whose child is being made is passed over while another is free:
// AMAF values rest on thousands of games where a move's own rest on a few,
// so a virtual loss hardly moves them, and every rollout in flight would
// otherwise wait on the same new child (deferred), one expansion at a time.
template <Game G>
Slot<G>* select_guided(Node<G>& node, Children<G>& children, const SelectionRule& rule) {
  const double log_n = std::log(static_cast<double>(node.visits.load(std::memory_order_relaxed)) + 1.0);
  Slot<G>* best = nullptr;
  Slot<G>* best_creating = nullptr;
  double best_score = -1.0, best_creating_score = -1.0;
  const std::size_t n = children.slots.size();
  for (std::size_t i = 0; i < n; ++i) {
    Slot<G>& s = children.slots[i];
    // Games not home yet are left out of the value, and come back below
    // as the virtual loss.
    const double in_flight = double(s.pending.load(std::memory_order_relaxed)) * rule.playouts;
    const double done = std::max(0.0, s.visits.load(std::memory_order_relaxed) - in_flight);
    const double games = done + s.prior_visits;
    double value = games > 0 ? (s.wins.load(std::memory_order_relaxed) + double(s.prior_wins)) / games : rule.first_play;
    if (rule.rave) {
      const std::uint64_t word = children.amaf[i].load(std::memory_order_relaxed);
      const double amaf_games = Amaf::games(word);
      if (amaf_games > 0) {
        const double beta = amaf_games / (amaf_games + games + amaf_games * games / rule.rave_equivalence);
        value = (1 - beta) * value + beta * (Amaf::won(word) / amaf_games);
      }
    }
    // The virtual loss: the rollouts in flight count as that many games
    // lost, for the blended value as for a move's own (by the factor such
    // games would give a move's own value: added to an AMAF value that
    // rests on thousands of games, they would not move it).
    const double lost = rule.virtual_loss * in_flight;
    if (lost > 0) value *= games / (games + lost);
    const double score = value + rule.c * std::sqrt(log_n / (games + lost + 1));
    if (s.status.load(std::memory_order_relaxed) == Slot<G>::creating) {
      if (score > best_creating_score) best_creating_score = score, best_creating = &s;
    } else if (score > best_score) {
      best_score = score, best = &s;
    }
  }
  return best != nullptr ? best : best_creating;
}

// A selection passes through slot: its visits (and, when selection needs
// them, its rollouts in flight) count before the outcome.
template <Game G>
void add_visits(Node<G>& node, Slot<G>& slot, const SelectionRule& rule) noexcept {
  node.visits.fetch_add(rule.playouts, std::memory_order_relaxed);
  slot.visits.fetch_add(rule.playouts, std::memory_order_relaxed);
  if (rule.tracks_pending()) slot.pending.fetch_add(1, std::memory_order_relaxed);
}

// Runs `playouts` random games from state; returns how many player 0 won.
template <Game G>
std::uint32_t simulate(const G& state, std::uint32_t playouts, Rng& rng) {
  std::uint32_t won = 0;
  for (std::uint32_t i = 0; i < playouts; ++i) won += state.playout(rng) == 0;
  return won;
}

// What a rollout's playouts (and, on the way up, the moves of its path)
// played, per move index: in how many games each player played the move
// first, and of those how many that player won. Indices at or above
// `used` are all zero, and only the used ones travel between processes.
// At most 255 playouts per rollout (one byte per count).
template <AmafGame G>
struct AmafCounts {
  struct Entry {
    std::uint8_t played[2];
    std::uint8_t won[2];
  };
  static constexpr std::uint32_t max_playouts = 255;
  std::uint32_t used = 0;
  Entry at[G::move_space];  // left uninitialized beyond used

  void grow(std::uint32_t index) noexcept {
    if (index < used) return;
    std::memset(static_cast<void*>(at + used), 0, (index + 1 - used) * sizeof(Entry));
    used = index + 1;
  }
  // One playout that `winner` won.
  void add(std::span<const typename PlayoutTrace<G::move_space>::Entry> moves, Player winner) noexcept {
    for (const auto& m : moves) {
      grow(m.index);
      ++at[m.index].played[m.player];
      at[m.index].won[m.player] += m.player == winner;
    }
  }
  // The move `player` chose at a node of the rollout's path: played first
  // in every one of its `playouts` games, `won` of which that player won.
  void path_move(std::uint16_t index, Player player, std::uint32_t playouts, std::uint32_t won) noexcept {
    grow(index);
    at[index].played[player] = static_cast<std::uint8_t>(playouts);
    at[index].won[player] = static_cast<std::uint8_t>(won);
    at[index].played[other(player)] = at[index].won[other(player)] = 0;
  }
  // Another share of the same leaf's playouts (leaf parallelism).
  void merge(const AmafCounts& more) noexcept {
    if (more.used == 0) return;
    grow(more.used - 1);
    for (std::uint32_t i = 0; i < more.used; ++i)
      for (int p = 0; p < 2; ++p) {
        at[i].played[p] = static_cast<std::uint8_t>(at[i].played[p] + more.at[i].played[p]);
        at[i].won[p] = static_cast<std::uint8_t>(at[i].won[p] + more.at[i].won[p]);
      }
  }
  std::span<const std::byte> bytes() const noexcept { return std::as_bytes(std::span(at, used)); }
  // From bytes(); false if they are not a whole number of entries within the move space.
  bool assign(std::span<const std::byte> from) noexcept {
    if (from.size() % sizeof(Entry) != 0 || from.size() / sizeof(Entry) > G::move_space) return false;
    used = static_cast<std::uint32_t>(from.size() / sizeof(Entry));
    if (used > 0) std::memcpy(static_cast<void*>(at), from.data(), from.size());
    return true;
  }
};

// As simulate, also counting what the playouts played.
template <AmafGame G>
std::uint32_t simulate(const G& state, std::uint32_t playouts, Rng& rng, AmafCounts<G>& amaf) {
  std::uint32_t won = 0;
  PlayoutTrace<G::move_space> trace;
  for (std::uint32_t i = 0; i < playouts; ++i) {
    trace.clear();
    const Player winner = state.playout(rng, trace);
    won += winner == 0;
    amaf.add(trace.entries(), winner);
  }
  return won;
}

// Calls add(i, packed) with a rollout's AMAF counts for each move i of a
// node where `mover` is to move that the rollout played; returns the games
// added (the audit counts them).
template <AmafGame G, class Add>
std::uint64_t for_each_amaf(const Children<G>& children, Player mover, const AmafCounts<G>& counts, Add&& add) noexcept {
  std::uint64_t added = 0;
  const std::size_t n = children.slots.size();
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint16_t index = G::move_index(children.slots[i].move);
    if (index >= counts.used) continue;
    const auto& e = counts.at[index];
    if (e.played[mover] == 0) continue;
    add(i, Amaf::pack(e.played[mover], e.won[mover]));
    added += e.played[mover];
  }
  return added;
}

// Adds a rollout's counts to the AMAF words of the moves of a node where
// `mover` is to move; returns the games added.
template <AmafGame G>
std::uint64_t add_amaf(Children<G>& children, Player mover, const AmafCounts<G>& counts) noexcept {
  return for_each_amaf(children, mover, counts, [&](std::size_t i, std::uint64_t packed) {
    children.amaf[i].fetch_add(packed, std::memory_order_relaxed);
  });
}

// One thread's AMAF counts for the nodes that nearly every rollout passes
// through (the root and the few just below it), gathered over a batch of
// rollouts before they reach the nodes' words.
//
// Why: a backpropagation adds to the AMAF words of about half a node's
// moves, one atomic add each, and at a node every rollout passes through
// two threads take turns owning the same cache lines. Measured with 2
// threads, the AMAF adds were the largest cost a rollout has beyond the
// sequential search's, and these batches took a third of them away
// (docs/results/mcts.md, "Tree parallelism with the knowledge"). Gathered
// here in plain words and added once a batch, a move costs one atomic add
// per `rollouts` rollouts. At such a node the AMAF values rest on
// thousands of games, so a value that lags by a batch per thread does not
// change what selection does. Nothing is lost: flush() adds what is left,
// and it runs before the tree is freed (the audit counts the games when
// they are gathered, and finds them stored).
template <AmafGame G>
class AmafBatches {
 public:
  // Room for `nodes` nodes at once (a power of two), each in the place its
  // address hashes to: a node that finds its place taken adds the batch
  // there to the tree and takes the place over.
  explicit AmafBatches(std::size_t nodes = 64) : places_(std::bit_ceil(std::max<std::size_t>(nodes, 1))) {}

  // As add_amaf, into this thread's batch for the node with these children,
  // added to the tree once it holds `rollouts` rollouts. Returns the games
  // gathered (counted now: they reach the tree by flush() at the latest).
  std::uint64_t add(Children<G>& children, Player mover, const AmafCounts<G>& counts, std::uint32_t rollouts) {
    Batch& b = place(children);
    const std::uint64_t added =
        for_each_amaf(children, mover, counts, [&](std::size_t i, std::uint64_t packed) { b.words[i] += packed; });
    if (++b.rollouts >= rollouts) add_to_tree(b);
    return added;
  }
  // Adds every batch to the tree and forgets the nodes: before they are freed.
  void flush() noexcept {
    for (Batch& b : places_) {
      if (b.children == nullptr) continue;
      add_to_tree(b);
      b.children = nullptr;
    }
  }
  // Nodes with a batch here (none after flush()).
  std::size_t nodes() const noexcept {
    return static_cast<std::size_t>(std::count_if(places_.begin(), places_.end(), [](const Batch& b) { return b.children != nullptr; }));
  }

 private:
  struct Batch {
    Children<G>* children = nullptr;
    std::uint32_t rollouts = 0;
    std::vector<std::uint64_t> words;  // Amaf::pack per slot
  };
  Batch& place(Children<G>& children) {
    const auto key = reinterpret_cast<std::uintptr_t>(&children);
    Batch& b = places_[(key * 0x9E3779B97F4A7C15ull >> 32) & (places_.size() - 1)];
    if (b.children == &children) return b;
    if (b.children != nullptr) add_to_tree(b);
    b.children = &children;
    b.words.assign(children.slots.size(), 0);
    return b;
  }
  static void add_to_tree(Batch& b) noexcept {
    for (std::size_t i = 0; i < b.words.size(); ++i)
      if (b.words[i] != 0) b.children->amaf[i].fetch_add(std::exchange(b.words[i], 0), std::memory_order_relaxed);
    b.rollouts = 0;
  }
  std::vector<Batch> places_;
};

// Intrusive multi-producer single-consumer queue of leaves awaiting
// simulation (Vyukov's): push is wait-free (one exchange); the consuming
// thread may briefly see a push half done and finds the leaf on a later pop.
template <Game G>
class SimulationQueue {
 public:
  void push(Node<G>* n) noexcept { push_link(n); }
  // Consumer thread only.
  Node<G>* pop() noexcept {
    QueueLink* tail = tail_;
    QueueLink* next = tail->next.load(std::memory_order_acquire);
    if (tail == &stub_) {
      if (next == nullptr) return nullptr;
      tail_ = tail = next;
      next = next->next.load(std::memory_order_acquire);
    }
    if (next == nullptr) {
      if (tail != head_.load(std::memory_order_acquire)) return nullptr;  // a push is half done
      push_link(&stub_);
      next = tail->next.load(std::memory_order_acquire);
      if (next == nullptr) return nullptr;
    }
    tail_ = next;
    return static_cast<Node<G>*>(tail);
  }

 private:
  void push_link(QueueLink* n) noexcept {
    n->next.store(nullptr, std::memory_order_relaxed);
    head_.exchange(n, std::memory_order_acq_rel)->next.store(n, std::memory_order_release);
  }
  QueueLink stub_;
  std::atomic<QueueLink*> head_{&stub_};
  QueueLink* tail_ = &stub_;
};

}  // namespace rdmx::mcts
