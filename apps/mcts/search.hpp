// rdmx's distributed Monte-Carlo Tree Search (Seriema 5.3.2), for any
// problem specification satisfying Game (game.hpp).
//
// Tree parallelism across threads and processes: every node is owned by one
// worker thread of the job; a new child's owner is drawn uniformly at random
// (or from the child's Zobrist hash). A rollout is a chain of calls:
//  - selection runs at each node's owner and continues with a call to the
//    chosen child's owner, counting a virtual loss on the way down;
//  - expansion sends the child's state in a call_buffer to its owner (or,
//    inside the owner's process, creates it directly), and the thread that
//    creates the node queues it for its own simulation in a wait-free
//    SimulationQueue (SearchOptions::spread_leaves: a random thread's);
//  - that thread runs the playouts and backpropagates with calls up the
//    parent chain; the first backpropagation into a parent also tells it where
//    the new child lives, and resumes the selections deferred while the child
//    was being created.
// Because the parent learns the child's location inside the rollout that
// created it, a search that has completed every rollout it started has no
// call in flight: nothing is lost and the tree can be freed.
//
// Threads of the root's process start rollouts at the root, in phases of
// `phase` x n rollouts (n threads in the job); every thread of the job serves
// calls and simulations. All calls go through one Aggregator per thread.
// Inside a process, nodes of other threads are visited directly (shared
// memory) unless SearchOptions::local_calls asks for calls there too.
//
// Baselines in the same framework: sequential (one thread, one tree), root
// parallelism (a tree per thread, root statistics summed) and leaf
// parallelism (one tree, each leaf's playouts spread over every thread).
//
// What the framework offers every game (docs/mcts.md), each a setting:
// AMAF/RAVE statistics for games that report their playouts' moves
// (AmafGame; they travel up with the rollout's backpropagation, across
// processes too), priors for games that give them (PriorGame), the virtual
// loss, and the final move choice.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mcts/tree.hpp"
#include "rdmx/core/backoff.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/rma.hpp"
#include "rdmx/invoke/aggregator.hpp"

namespace rdmx::mcts {

enum class Parallelism { tree, root, leaf, sequential };
Parallelism parse_parallelism(const std::string& text);  // throws std::invalid_argument
const char* to_string(Parallelism p);

// The move a search plays: the root move with the most visits (robust: a
// move with a high mean on few games is not trusted), or the highest mean
// among the moves with any visit (for comparison).
enum class FinalChoice { most_visits, best_mean };
FinalChoice parse_final_choice(const std::string& text);  // throws std::invalid_argument
const char* to_string(FinalChoice f);

struct SearchOptions {
  Parallelism parallelism = Parallelism::tree;
  double c = 0.8;                      // UCB exploration constant
  std::uint32_t playouts = 16;         // random playouts per leaf
  std::uint32_t phase = 4096;          // rollouts per phase, per thread of the job
  std::uint32_t inflight = 4;          // tree: rollouts in flight per thread of the job (docs/mcts.md: strength)
  // tree: but at least this many in the job. A small job's threads outside
  // the root's process only get work that arrives by call, and 4 per
  // thread left them idle between rollouts (docs/mcts.md: in-flight rollouts).
  std::uint32_t inflight_floor = 16;
  // tree: the window those two make for a job of `threads` worker threads.
  std::uint64_t rollouts_in_flight(std::uint64_t threads) const {
    return std::max<std::uint64_t>(std::uint64_t{inflight} * threads, inflight_floor);
  }
  bool hash_owner = false;             // tree: child owner from the Zobrist hash, not at random
  // tree: a new node deeper than this stays in its parent's process (on a
  // thread of it): a rollout crosses processes only in the top levels, about
  // 2 messages per rollout instead of 3.5 with 2 processes, which over TCP
  // makes 1.2-1.8x the rollouts (docs/mcts.md, "Ownership and messages"). Two
  // levels spread the work as well as placing every node at random (the
  // seed's: no_spread_limit); one level left a process idle.
  static constexpr std::uint32_t no_spread_limit = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t spread_depth = 2;
  bool local_calls = false;            // tree: calls to other threads of the same process too
  // tree: calls to a process whose memory this one reaches only by emulated
  // RDMA (over TCP) through the aggregator's rings too, as the seed does.
  // Off: such calls are send-based (UCX active messages); a ring write over
  // TCP waits for the destination's service thread (docs/mcts.md, "Calls").
  bool rings_over_tcp = false;
  // tree: hand each new leaf to a random thread of its process to simulate
  // (the seed's, after Seriema), not to the thread that created it. Off:
  // the leaf, and the nodes its backpropagation adds to first, are in that
  // thread's cache, and a thread that is off its core holds up only the
  // rollouts it started (docs/mcts.md, "Leaf evaluation").
  bool spread_leaves = false;
  Aggregation aggregation = Aggregation::trad;
  std::uint64_t seed = 1;
  // Rollouts' worth of losses a rollout in flight counts for in selection
  // (1: the visits counted on the way down; 0: none).
  std::uint32_t virtual_loss = 1;
  // AMAF/RAVE statistics in the tree (an AmafGame; at most 255 playouts per leaf).
  bool rave = false;
  double rave_equivalence = 1000;  // games at which a move's own value and its AMAF value weigh alike
  // Games a prior of weight 1 counts for (a PriorGame; 0: no priors).
  std::uint32_t prior_games = 0;
  double first_play = 1.0;  // with RAVE or priors: the value of a move nothing is known of
  // RAVE at the nodes nearly every rollout passes through: from
  // `amaf_batch_from` rollouts through a node on, each thread gathers the
  // node's AMAF counts over `amaf_batch` rollouts and adds them at once
  // (AmafBatches in tree.hpp: one atomic add per move and rollout there
  // made the threads fight over the same cache lines). 1: no batches.
  std::uint32_t amaf_batch = 16;
  std::uint32_t amaf_batch_from = 256;
  FinalChoice final_choice = FinalChoice::most_visits;
  // Count every statistic added and stored in the tree, to prove none is
  // lost across threads and processes (SearchResult::audit; costs a walk of
  // the tree at the end of each search).
  bool audit = false;

  // Selection then considers every move, tried or not, by what is known of it.
  bool guided() const noexcept { return rave || prior_games > 0; }
  SelectionRule rule() const noexcept {
    return {c, playouts, virtual_loss, rave, rave_equivalence, first_play, guided()};
  }
  Expansion expansion() const noexcept { return {rave, prior_games}; }
};

// Stop after this many rollouts or this much time, whichever comes first
// (0: no limit; at least one must be set).
struct Budget {
  std::uint64_t rollouts = 0;
  double seconds = 0;
};

// What a search did. Counters are summed over every thread of the job.
template <Game G>
struct SearchResult {
  struct Move {
    typename G::Move move;
    std::uint32_t visits;  // playouts through this move
    std::uint32_t wins;    // of them, won by the player to move at the root
  };
  typename G::Move best{};  // most visited root move
  double win_rate = 0;      // of best, for the player to move
  std::uint64_t rollouts = 0;
  double seconds = 0;
  std::uint64_t visits = 0;       // selection steps (node visits)
  std::uint64_t nodes = 0;        // nodes created
  std::uint64_t terminals = 0;    // rollouts that ended on a finished game already in the tree
  std::uint64_t deferred = 0;     // selections that waited for a child being created
  std::uint64_t remote_calls = 0; // calls that crossed threads
  std::uint64_t process_calls = 0;  // of them, calls that crossed processes (the network's messages)
  std::uint64_t call_bytes = 0;     // what those carried: captures, buffers, results (docs/mcts.md, "Costs per rollout")
  std::uint64_t peak_in_flight = 0;  // tree: most rollouts started and not yet home at once, as starters saw it
  std::uint32_t max_depth = 0;      // deepest node a rollout created or reached
  double mean_depth = 0;            // of the nodes rollouts created or reached
  // With SearchOptions::audit: statistics added by rollouts, and found in
  // the tree when it was freed (each pair equal if no update was lost).
  struct Audit {
    std::uint64_t visits_added = 0, visits_stored = 0;
    std::uint64_t wins_added = 0, wins_stored = 0;
    std::uint64_t amaf_added = 0, amaf_stored = 0;  // AMAF games
  } audit;
  std::vector<Move> moves;        // root moves, most visited first
  double rollouts_per_second() const { return seconds > 0 ? rollouts / seconds : 0; }
  double steps_per_second() const { return seconds > 0 ? (rollouts + visits) / seconds : 0; }
};

template <Game G>
class Engine {
 public:
  using Result = SearchResult<G>;
  using Progress = std::function<void(const Result&)>;  // after each phase, on the driver thread

  // Construct one per process, after the Job and before Job::run.
  explicit Engine(SearchOptions options)
      : options_(options),
        queues_(Job::current().threads_per_process()),
        releases_(std::make_unique<std::atomic<std::uint64_t>[]>(Job::current().threads_per_process())),
        runs_(std::make_unique<std::uint64_t[]>(Job::current().threads_per_process())) {
    if (options_.playouts == 0 || options_.phase == 0 || options_.inflight == 0)
      throw std::invalid_argument("rdmx mcts: playouts, phase and inflight must be positive");
    if (options_.playouts > (1u << 20)) throw std::invalid_argument("rdmx mcts: at most 2^20 playouts per leaf");
    check_knowledge(options_);
    if (instance_ != nullptr) throw std::logic_error("rdmx mcts: one Engine per process");
    instance_ = this;
  }
  ~Engine() { instance_ = nullptr; }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Call on every worker thread, inside Job::run (one Engine per process).
  // Thread 0 of process 0 runs driver(), which calls search(); every other
  // thread serves rollouts until driver() returns.
  void run(ThreadId me, const std::function<void()>& driver);

  // Driver thread only.
  Result search(const G& position, Budget budget, const Progress& progress = {});
  const SearchOptions& options() const noexcept { return options_; }
  SearchOptions& options() noexcept { return options_; }  // between searches

  // Throws std::invalid_argument for settings this game cannot have.
  static void check_knowledge(const SearchOptions& o) {
    if (o.rave && !AmafGame<G>)
      throw std::invalid_argument("rdmx mcts: RAVE needs a game whose playouts report their moves (AmafGame)");
    if constexpr (AmafGame<G>)
      if (o.rave && o.playouts > AmafCounts<G>::max_playouts)
        throw std::invalid_argument("rdmx mcts: RAVE counts at most 255 playouts per leaf");
    if (o.prior_games > 0 && !PriorGame<G>)
      throw std::invalid_argument("rdmx mcts: priors need a game that gives them (PriorGame)");
    if (o.prior_games > 65535) throw std::invalid_argument("rdmx mcts: a prior counts for at most 65535 games");
    if (o.virtual_loss > 64) throw std::invalid_argument("rdmx mcts: a virtual loss of at most 64 rollouts");
    if (!(o.rave_equivalence > 0)) throw std::invalid_argument("rdmx mcts: the RAVE equivalence must be positive");
  }

  // This host runs more worker threads of the job than it has cores.
  static bool oversubscribed() { return Job::current().oversubscribed(); }

  static Engine& current() {
    if (instance_ == nullptr) throw std::logic_error("rdmx mcts: no Engine is running in this process");
    return *instance_;
  }

 private:
  // Per-thread counters, summed into the Result (trivially copyable: they
  // come back to the driver with call_return).
  struct Stats {
    std::uint64_t visits = 0, nodes = 0, terminals = 0, deferred = 0, remote_calls = 0, process_calls = 0, call_bytes = 0;
    std::uint64_t depth_sum = 0;  // over nodes and terminals
    std::uint32_t depth_max = 0;
    typename Result::Audit audit;
    void reached(std::uint32_t depth) noexcept {
      depth_sum += depth;
      depth_max = std::max(depth_max, depth);
    }
    void add_to(Result& r) const {
      r.visits += visits;
      r.nodes += nodes;
      r.terminals += terminals;
      r.deferred += deferred;
      r.remote_calls += remote_calls;
      r.process_calls += process_calls;
      r.call_bytes += call_bytes;
      r.max_depth = std::max(r.max_depth, depth_max);
      // mean_depth holds the sum until the result is complete (finish_result)
      r.mean_depth += double(depth_sum);
      r.audit.visits_added += audit.visits_added;
      r.audit.visits_stored += audit.visits_stored;
      r.audit.wins_added += audit.wins_added;
      r.audit.wins_stored += audit.wins_stored;
      r.audit.amaf_added += audit.amaf_added;
      r.audit.amaf_stored += audit.amaf_stored;
    }
  };
  // AMAF counts of a rollout, or nothing for a game without them.
  struct NoAmaf {};
  template <class Game>
  struct AmafOf {
    using type = NoAmaf;
  };
  template <AmafGame Game>
  struct AmafOf<Game> {
    using type = AmafCounts<Game>;
  };
  template <class Game>
  struct BatchesOf {
    using type = NoAmaf;
  };
  template <AmafGame Game>
  struct BatchesOf<Game> {
    using type = AmafBatches<Game>;
  };
  using Counts = typename AmafOf<G>::type;
  // Leaf parallelism: one thread's share of a leaf's playouts.
  struct LeafShare {
    std::uint32_t won = 0;
    Counts amaf;
  };
  struct Worker {
    ThreadId me;
    Rng rng;
    std::unique_ptr<Aggregator> aggregator;
    std::vector<std::unique_ptr<Node<G>>> owned;
    Stats stats;
    typename BatchesOf<G>::type amaf_batches;  // RAVE: this thread's counts for the busiest nodes
    unsigned since_flush = 0;
    unsigned idle_steps = 0;  // steps in a row that found nothing to do
  };
  // Root-process state of the search under way.
  struct Rollouts {
    std::atomic<Node<G>*> root{nullptr};
    std::atomic<std::uint64_t> started{0}, completed{0}, limit{0}, inflight{0}, peak{0};
    // Set in `started` when time runs out: a starter that checked the old
    // limit then fails its exchange, so the count read with the bit is final.
    static constexpr std::uint64_t closed = std::uint64_t{1} << 63;
  };
  struct RootStats {  // root parallelism: one thread's root moves
    std::uint32_t count = 0;
    std::uint64_t rollouts = 0;
    Stats stats;
    typename Result::Move moves[G::max_moves];
  };
  Worker& worker() const { return *worker_; }
  std::uint32_t total_threads() const { return Job::current().total_threads(); }
  ThreadId thread_at(std::uint32_t index) const {
    const std::uint32_t t = Job::current().threads_per_process();
    return {index / t, index % t};
  }
  bool here(ThreadId owner) const {
    return owner == worker().me || (!options_.local_calls && owner.process == worker().me.process);
  }

  bool step();  // serve one round: calls, a new rollout, a simulation
  // Count a call from this thread to `to` carrying `bytes` (captures, buffer, result).
  void count_call(ThreadId to, std::size_t bytes) {
    Stats& s = worker().stats;
    ++s.remote_calls;
    if (to.process != worker().me.process) {
      ++s.process_calls;
      s.call_bytes += bytes;
    }
  }
  // A call of the search to thread `to`: through this thread's aggregator,
  // or send-based to a process reached by emulated RDMA only.
  bool by_send(std::uint32_t process);
  template <class F>
  void call_at(ThreadId to, const F& f) {
    if (by_send(to.process)) return rdmx::call(to, f);
    worker().aggregator->call(to, f);
  }
  template <class F>
  void call_buffer_at(ThreadId to, const F& f, std::span<const std::byte> bytes) {
    if (by_send(to.process)) return rdmx::call_buffer(to, f, bytes);
    worker().aggregator->call_buffer(to, f, bytes);
  }
  // With more threads than cores on this host, an idle thread yields at
  // once: the thread it waits for may be the one it keeps off the core, and
  // MCTS threads never wait for a peer to serve them memory (docs/mcts.md).
  static Backoff idle_backoff() { return Backoff(oversubscribed() ? 1 : Backoff::idle_spins()); }
  // What an idle wait does (Backoff's process-wide mode): what the process
  // chose while the engine has nothing to do (rdmx-hex: block, sleeping on
  // the network worker), but never block while it is searching: the work
  // that would wake a sleeping thread, a leaf pushed to its queue or a
  // one-sided call, raises no event, so it would sleep through its share
  // of the search. A thread that found work sets the busy mode; one that
  // found none for `idle_steps_to_rest` steps in a row sets the chosen one
  // back.
  static constexpr unsigned idle_steps_to_rest = 4096;
  void note_activity(bool did);
  using clock = std::chrono::steady_clock;
  static double seconds_since(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }
  bool try_start();
  void select_from(NodeRef<G> at);
  // The slot a selection at node goes through (nullptr: none counted yet,
  // try again), and whether this selection claimed it to make the child.
  std::pair<Slot<G>*, bool> choose(Node<G>& node, Children<G>& children);
  void pass(Node<G>& node, Slot<G>& slot);  // add_visits, counted for the audit
  void expand(Node<G>& parent, std::uint16_t slot, const G& child);
  void create(NodeRef<G> parent, std::uint16_t slot, const G& state, ThreadId owner, std::uint16_t depth);
  void simulate_leaf(Node<G>& leaf);
  // amaf: the rollout's AMAF counts (nullptr without RAVE); changed on the way up.
  void backprop(NodeRef<G> at, std::uint16_t slot, std::uint32_t wins0, NodeRef<G> new_child, Counts* amaf);
  // A rollout's result at one node of its path, through `slot`; returns the node's children.
  Children<G>& update(Node<G>& node, std::uint16_t slot, std::uint32_t wins0, Counts* amaf);
  // A rollout's AMAF counts at node (batched there when it is busy); returns the games added.
  std::uint64_t add_amaf_at(Node<G>& node, Children<G>& children, Player mover, const Counts& counts);
  void continue_at(NodeRef<G> child);
  // Playouts from a leaf (with their AMAF counts when amaf is not null).
  std::uint32_t playouts(const G& state, std::uint32_t count, Rng& rng, Counts* amaf);
  // Frees this thread's nodes and hands back its counters. together: every
  // thread of this process is finishing (tree and root parallelism).
  Stats finish(bool together);

  // The driver's side of each parallelism.
  Result search_tree(const G& position, Budget budget, const Progress& progress);
  Result search_local(const G& position, Budget budget, const Progress& progress);
  Result search_root(const G& position, Budget budget);
  // A single-threaded tree on the calling thread; evaluate(state, amaf)
  // returns wins of player 0 and adds to amaf (when not null).
  template <class Evaluate>
  void local_rollout(Node<G>& root, Evaluate&& evaluate);
  RootStats root_search(const G& position, Budget budget);
  void collect(Node<G>& root, Result& r) const;
  void rank(Result& r) const;  // sorts the root moves and picks the best
  // The tree's statistics, summed over this thread's nodes (audit).
  void count_stored(typename Result::Audit& audit) const;
  static void finish_result(Result& r);

  SearchOptions options_;
  Rollouts rollouts_;
  std::atomic<std::uint64_t> finishing_{0};  // finish(true) calls in this process, ever
  std::vector<SimulationQueue<G>> queues_;  // one per worker thread of this process
  // Per worker thread of this process: how often the driver let it go, and
  // how many runs it began (its own). Counted, not a flag in its Worker: the
  // call that lets a thread go may run before the thread began its run, on
  // another thread standing in for it (serve_idle_workers), and a count
  // needs neither the thread's Worker nor a reset that could come after it.
  std::unique_ptr<std::atomic<std::uint64_t>[]> releases_;
  std::unique_ptr<std::uint64_t[]> runs_;
  const rdmx::Progress rest_mode_ = Backoff::mode();
  const rdmx::Progress busy_mode_ = rest_mode_ == rdmx::Progress::spin ? rdmx::Progress::spin : rdmx::Progress::yield;
  inline static Engine* instance_ = nullptr;
  inline static thread_local Worker* worker_ = nullptr;
};

// ---- implementation ---------------------------------------------------------

template <Game G>
void Engine<G>::run(ThreadId me, const std::function<void()>& driver) {
  Worker w;
  w.me = me;
  w.rng = Rng(options_.seed * 0x9E3779B97F4A7C15ull + me.process * 1000003ull + me.thread);
  w.aggregator = std::make_unique<Aggregator>(options_.aggregation);
  worker_ = &w;
  // No search starts before every process has its Engine. (A process still
  // in the barrier runs the first calls of the search: worker_ is set.)
  if (me.thread == 0) Job::current().barrier();
  if (me == ThreadId{0, 0}) {
    // However the driver ends, the serving threads must be let go.
    auto release = [this] {
      Synchronizer sync;
      for (std::uint32_t i = 1; i < total_threads(); ++i)
        rdmx::call(
            thread_at(i),
            [t = thread_at(i).thread] { Engine::current().releases_[t].fetch_add(1, std::memory_order_release); },
            rdmx::when_run(sync));
      sync.wait();
    };
    try {
      driver();
    } catch (...) {
      release();
      throw;
    }
    release();
  } else {
    const std::uint64_t run = ++runs_[me.thread];
    Backoff backoff = idle_backoff();
    while (releases_[me.thread].load(std::memory_order_acquire) < run) backoff(step());
  }
  w.aggregator->shutdown();
  worker_ = nullptr;
}

template <Game G>
bool Engine<G>::step() {
  Worker& w = worker();
  bool did = rdmx::progress() > 0;
  if (try_start()) did = true;
  if (Node<G>* leaf = queues_[w.me.thread].pop()) {
    simulate_leaf(*leaf);
    did = true;
  }
  // trad batches calls up to 4 KiB: push them out when idle, and now and
  // then when busy, so the rollouts waiting on them keep moving.
  if (!did || ++w.since_flush >= 16) {
    w.aggregator->flush();
    w.since_flush = 0;
  }
  note_activity(did);
  return did;
}

template <Game G>
void Engine<G>::note_activity(bool did) {
  Worker& w = worker();
  if (did) {
    w.idle_steps = 0;
    if (Backoff::mode() != busy_mode_) Backoff::set_mode(busy_mode_);
  } else if (++w.idle_steps == idle_steps_to_rest && rest_mode_ != busy_mode_) {
    Backoff::set_mode(rest_mode_);
  }
}

template <Game G>
bool Engine<G>::try_start() {
  if (rollouts_.root.load(std::memory_order_relaxed) == nullptr || worker().me.process != 0) return false;
  std::uint64_t s = rollouts_.started.load(std::memory_order_relaxed);
  do {
    if (s >= rollouts_.limit.load(std::memory_order_acquire) ||
        s - rollouts_.completed.load(std::memory_order_acquire) >= rollouts_.inflight.load(std::memory_order_relaxed))
      return false;
  } while (!rollouts_.started.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel));
  // Completions read after the exchange may include rollouts started
  // after it: the difference is then at most the true count, or below 0.
  const std::uint64_t done = rollouts_.completed.load(std::memory_order_relaxed);
  const std::uint64_t in_flight = s + 1 > done ? s + 1 - done : 0;
  std::uint64_t peak = rollouts_.peak.load(std::memory_order_relaxed);
  while (in_flight > peak && !rollouts_.peak.compare_exchange_weak(peak, in_flight, std::memory_order_relaxed)) {
  }
  // The rollout belongs to the search that was under way at the exchange,
  // which cannot end before it does. Its root is the one published now: a
  // root read before the exchange may be a finished search's (freed), and
  // the next search publishes its root just after its limit.
  Node<G>* root;
  while ((root = rollouts_.root.load(std::memory_order_acquire)) == nullptr) {
  }
  select_from(root->ref());
  return true;
}

template <Game G>
std::pair<Slot<G>*, bool> Engine<G>::choose(Node<G>& node, Children<G>& children) {
  if (options_.guided()) {
    Slot<G>* s = select_guided(node, children, options_.rule());
    return {s, s->try_claim()};
  }
  if (Slot<G>* s = node.claim_untried(children.slots)) {
    s->status.store(Slot<G>::creating, std::memory_order_relaxed);
    return {s, true};
  }
  return {select_ucb(node, children.slots, options_.rule()), false};
}

template <Game G>
void Engine<G>::pass(Node<G>& node, Slot<G>& slot) {
  add_visits(node, slot, options_.rule());
  worker().stats.audit.visits_added += options_.playouts;
}

template <Game G>
void Engine<G>::select_from(NodeRef<G> at) {
  Worker& w = worker();
  Node<G>* node = at.node;
  const std::uint32_t p = options_.playouts;
  for (;;) {
    ++w.stats.visits;
    if (node->state.terminal()) {  // an exact result: no playouts needed
      ++w.stats.terminals;
      w.stats.reached(node->depth);
      Counts none;
      backprop(node->parent, node->parent_slot, node->state.winner() == 0 ? p : 0, {}, options_.rave ? &none : nullptr);
      return;
    }
    auto& children = node->expand(w.rng, options_.expansion());
    const auto [s, claimed] = choose(*node, children);
    if (s == nullptr) continue;  // the only claimed slot is not counted yet
    pass(*node, *s);
    if (claimed) {
      G child = node->state;
      child.play(s->move);
      expand(*node, static_cast<std::uint16_t>(s - children.slots.data()), child);
      return;
    }
    if (!s->ready_or_defer()) {
      ++w.stats.deferred;
      return;
    }
    if (!here(s->child.owner)) {
      continue_at(s->child);
      return;
    }
    node = s->child.node;
  }
}

template <Game G>
bool Engine<G>::by_send(std::uint32_t process) {
  // Not cached here: the fabric keeps the answer once UCX has reported the
  // endpoint's lanes, and says no until then.
  return !options_.rings_over_tcp && rdmx::rma_emulated(process);
}

template <Game G>
void Engine<G>::continue_at(NodeRef<G> child) {
  if (here(child.owner)) return select_from(child);
  auto select = [child] { Engine::current().select_from(child); };
  count_call(child.owner, sizeof select);
  call_at(child.owner, select);
}

template <Game G>
void Engine<G>::expand(Node<G>& parent, std::uint16_t slot, const G& child) {
  Worker& w = worker();
  const std::uint32_t n = total_threads();
  const NodeRef<G> up = parent.ref();
  const std::uint16_t depth = static_cast<std::uint16_t>(parent.depth + 1);
  const std::uint32_t pick = options_.hash_owner ? static_cast<std::uint32_t>(child.hash() % n) : w.rng.below(n);
  const std::uint32_t per_process = Job::current().threads_per_process();
  const ThreadId owner = depth > options_.spread_depth ? ThreadId{w.me.process, pick % per_process} : thread_at(pick);
  if (here(owner)) return create(up, slot, child, owner, depth);
  auto create_there = [up, slot, depth](std::span<std::byte> bytes) {
    if (bytes.size() != sizeof(G)) throw Error(Errc::protocol, "rdmx mcts: a child state of the wrong size arrived");
    G state;
    std::memcpy(static_cast<void*>(&state), bytes.data(), sizeof(G));
    Engine::current().create(up, slot, state, this_thread(), depth);
  };
  count_call(owner, sizeof create_there + sizeof(G));
  call_buffer_at(owner, create_there, std::as_bytes(std::span(&child, 1)));
}

template <Game G>
void Engine<G>::create(NodeRef<G> parent, std::uint16_t slot, const G& state, ThreadId owner, std::uint16_t depth) {
  Worker& w = worker();
  auto* node = w.owned.emplace_back(std::make_unique<Node<G>>(state, owner, parent, slot, depth)).get();
  ++w.stats.nodes;
  w.stats.reached(depth);
  if (state.terminal()) {
    Counts none;
    return backprop(parent, slot, state.winner() == 0 ? options_.playouts : 0, node->ref(), options_.rave ? &none : nullptr);
  }
  // Leaf evaluation by this thread, or with spread_leaves by any thread of
  // this process (Seriema: wait-free queues).
  const std::uint32_t t = options_.spread_leaves ? w.rng.below(static_cast<std::uint32_t>(queues_.size())) : w.me.thread;
  queues_[t].push(node);
}

template <Game G>
std::uint32_t Engine<G>::playouts(const G& state, std::uint32_t count, Rng& rng, Counts* amaf) {
  if constexpr (AmafGame<G>)
    if (amaf != nullptr) return simulate(state, count, rng, *amaf);
  return simulate(state, count, rng);
}

template <Game G>
void Engine<G>::simulate_leaf(Node<G>& leaf) {
  Counts amaf;
  Counts* counts = options_.rave ? &amaf : nullptr;
  const std::uint32_t wins0 = playouts(leaf.state, options_.playouts, worker().rng, counts);
  backprop(leaf.parent, leaf.parent_slot, wins0, leaf.ref(), counts);
}

template <Game G>
Children<G>& Engine<G>::update(Node<G>& node, std::uint16_t slot, std::uint32_t wins0, Counts* amaf) {
  Stats& stats = worker().stats;
  const std::uint32_t p = options_.playouts;
  Children<G>& children = *node.children.load(std::memory_order_acquire);
  Slot<G>& s = children.slots[slot];
  const Player mover = node.state.to_move();
  const std::uint32_t won = mover == 0 ? wins0 : p - wins0;
  s.wins.fetch_add(won, std::memory_order_relaxed);
  stats.audit.wins_added += won;
  if (options_.rule().tracks_pending()) s.pending.fetch_sub(1, std::memory_order_relaxed);
  if constexpr (AmafGame<G>) {
    if (amaf != nullptr) {
      amaf->path_move(G::move_index(s.move), mover, p, won);
      stats.audit.amaf_added += add_amaf_at(node, children, mover, *amaf);
    }
  }
  return children;
}

template <Game G>
std::uint64_t Engine<G>::add_amaf_at(Node<G>& node, Children<G>& children, Player mover, const Counts& counts) {
  if constexpr (AmafGame<G>) {
    const std::uint64_t busy = std::uint64_t{options_.amaf_batch_from} * options_.playouts;
    if (options_.amaf_batch > 1 && node.visits.load(std::memory_order_relaxed) >= busy)
      return worker().amaf_batches.add(children, mover, counts, options_.amaf_batch);
    return add_amaf(children, mover, counts);
  } else {
    return 0;
  }
}

template <Game G>
void Engine<G>::backprop(NodeRef<G> at, std::uint16_t slot, std::uint32_t wins0, NodeRef<G> new_child, Counts* amaf) {
  while (at) {
    if (!here(at.owner)) {
      if constexpr (AmafGame<G>) {
        if (amaf != nullptr) {
          // The AMAF counts travel with the rollout: the moves its playouts
          // and its path below `at` played.
          auto up = [at, slot, wins0, new_child](std::span<std::byte> bytes) {
            Counts counts;
            if (!counts.assign(bytes)) throw Error(Errc::protocol, "rdmx mcts: AMAF counts of the wrong size arrived");
            Engine::current().backprop(at, slot, wins0, new_child, &counts);
          };
          count_call(at.owner, sizeof up + amaf->bytes().size());
          call_buffer_at(at.owner, up, amaf->bytes());
          return;
        }
      }
      auto up = [at, slot, wins0, new_child] { Engine::current().backprop(at, slot, wins0, new_child, nullptr); };
      count_call(at.owner, sizeof up);
      call_at(at.owner, up);
      return;
    }
    Node<G>& node = *at.node;
    Slot<G>& s = update(node, slot, wins0, amaf).slots[slot];
    if (new_child) {
      for (std::uint32_t k = s.attach(new_child); k > 0; --k) continue_at(new_child);
      new_child = {};
    }
    slot = node.parent_slot;
    at = node.parent;
  }
  rollouts_.completed.fetch_add(1, std::memory_order_acq_rel);  // reached the root
}

template <Game G>
typename Engine<G>::Stats Engine<G>::finish(bool together) {
  Worker& w = worker();
  // This thread's AMAF batches go into the tree before any of it is freed
  // (the nodes may be other threads' of this process, which free them
  // after the meeting below).
  if constexpr (AmafGame<G>) w.amaf_batches.flush();
  if (together) {
    // The threads of a process touch each other's nodes directly, and what
    // ordered those writes before this point may have been calls through
    // other processes, which order nothing here. Meet every thread of this
    // process before any frees its nodes.
    const std::uint64_t t = Job::current().threads_per_process();
    const std::uint64_t target = (finishing_.fetch_add(1, std::memory_order_acq_rel) / t + 1) * t;
    while (finishing_.load(std::memory_order_acquire) < target) rdmx::progress();
  }
  w.aggregator->flush();
  if (options_.audit) count_stored(w.stats.audit);
  w.owned.clear();
  return std::exchange(w.stats, Stats{});
}

template <Game G>
void Engine<G>::count_stored(typename Result::Audit& audit) const {
  for (const auto& node : worker().owned) {
    const Children<G>* children = node->children.load(std::memory_order_acquire);
    if (children == nullptr) continue;
    for (const Slot<G>& s : children->slots) {
      audit.visits_stored += s.visits.load(std::memory_order_relaxed);
      audit.wins_stored += s.wins.load(std::memory_order_relaxed);
    }
    for (const auto& word : children->amaf) audit.amaf_stored += Amaf::games(word.load(std::memory_order_relaxed));
  }
}

template <Game G>
void Engine<G>::finish_result(Result& r) {
  const std::uint64_t reached = r.nodes + r.terminals;
  r.mean_depth = reached > 0 ? r.mean_depth / double(reached) : 0;
}

template <Game G>
typename Engine<G>::Result Engine<G>::search(const G& position, Budget budget, const Progress& progress) {
  if (worker_ == nullptr || worker().me != ThreadId{0, 0})
    throw std::logic_error("rdmx mcts: search() runs on the driver thread (thread 0 of process 0) inside Engine::run");
  if (budget.rollouts == 0 && budget.seconds <= 0) throw std::invalid_argument("rdmx mcts: the search needs a budget");
  if (position.terminal()) throw std::invalid_argument("rdmx mcts: the game is already over");
  switch (options_.parallelism) {
    case Parallelism::tree: return search_tree(position, budget, progress);
    case Parallelism::root: return search_root(position, budget);
    case Parallelism::leaf:
    case Parallelism::sequential: return search_local(position, budget, progress);
  }
  throw std::logic_error("rdmx mcts: unknown parallelism");
}

template <Game G>
typename Engine<G>::Result Engine<G>::search_tree(const G& position, Budget budget, const Progress& progress) {
  Worker& w = worker();
  const auto t0 = clock::now();
  const std::uint64_t n = total_threads(), phase = std::uint64_t{options_.phase} * n;
  auto& root = *w.owned.emplace_back(std::make_unique<Node<G>>(position, w.me));
  const std::uint64_t total = budget.rollouts ? budget.rollouts : UINT64_MAX;
  rollouts_.started = rollouts_.completed = rollouts_.peak = 0;
  rollouts_.inflight = options_.rollouts_in_flight(n);
  rollouts_.limit.store(std::min(phase, total), std::memory_order_release);
  rollouts_.root.store(&root, std::memory_order_release);

  Result r;
  bool stopping = false;
  Backoff backoff = idle_backoff();
  for (;;) {
    backoff(step());
    const std::uint64_t done = rollouts_.completed.load(std::memory_order_acquire);
    const std::uint64_t limit = rollouts_.limit.load(std::memory_order_relaxed);
    const double elapsed = seconds_since(t0);
    if (!stopping && budget.seconds > 0 && elapsed >= budget.seconds) {
      // Out of time: start nothing more, finish what is in flight. Storing
      // a lower limit alone would race with a starter between its check and
      // its exchange; closing `started` makes that exchange fail.
      const std::uint64_t started = rollouts_.started.fetch_or(Rollouts::closed, std::memory_order_acq_rel);
      rollouts_.limit.store(started & ~Rollouts::closed, std::memory_order_release);
      stopping = true;
      continue;
    }
    if (done < limit) continue;
    if (progress) {
      collect(root, r);
      r.rollouts = done;
      r.seconds = elapsed;
      progress(r);
    }
    if (stopping || done >= total) break;
    rollouts_.limit.store(std::min(done + phase, total), std::memory_order_release);
  }
  rollouts_.root.store(nullptr, std::memory_order_release);
  collect(root, r);
  r.rollouts = rollouts_.completed.load();
  r.seconds = seconds_since(t0);
  r.peak_in_flight = rollouts_.peak.load();

  // Every rollout came home, so no call of this search is in flight: each
  // thread may free the nodes it owns. Their counters come back with it.
  std::vector<Stats> stats(n);
  Synchronizer sync;
  for (std::uint32_t i = 1; i < n; ++i)
    rdmx::call_return(thread_at(i), [] { return Engine::current().finish(true); }, rdmx::into(stats[i], sync));
  stats[0] = finish(true);
  sync.wait();
  for (const Stats& s : stats) s.add_to(r);
  finish_result(r);
  return r;
}

template <Game G>
template <class Evaluate>
void Engine<G>::local_rollout(Node<G>& root, Evaluate&& evaluate) {
  Worker& w = worker();
  const std::uint32_t p = options_.playouts;
  Counts counts;
  Counts* amaf = options_.rave ? &counts : nullptr;
  Node<G>* node = &root;
  std::uint32_t wins0;
  for (;;) {  // selection and expansion
    ++w.stats.visits;
    if (node->state.terminal()) {
      ++w.stats.terminals;
      w.stats.reached(node->depth);
      wins0 = node->state.winner() == 0 ? p : 0;
      break;
    }
    auto& children = node->expand(w.rng, options_.expansion());
    auto [s, claimed] = choose(*node, children);
    pass(*node, *s);
    if (claimed) {
      G child = node->state;
      child.play(s->move);
      auto* leaf = w.owned.emplace_back(std::make_unique<Node<G>>(child, w.me, node->ref(),
                                                                  static_cast<std::uint16_t>(s - children.slots.data()),
                                                                  static_cast<std::uint16_t>(node->depth + 1))).get();
      ++w.stats.nodes;
      w.stats.reached(leaf->depth);
      s->attach(leaf->ref());
      node = leaf;
      wins0 = child.terminal() ? (child.winner() == 0 ? p : 0) : evaluate(child, amaf);
      break;
    }
    node = s->child.node;
  }
  for (NodeRef<G> at = node->parent, child = node->ref(); at; child = at, at = at.node->parent)
    update(*at.node, child.node->parent_slot, wins0, amaf);
}

template <Game G>
typename Engine<G>::Result Engine<G>::search_local(const G& position, Budget budget, const Progress& progress) {
  Worker& w = worker();
  const auto t0 = clock::now();
  const std::uint32_t n = options_.parallelism == Parallelism::leaf ? total_threads() : 1;
  const std::uint32_t p = options_.playouts;
  auto& root = *w.owned.emplace_back(std::make_unique<Node<G>>(position, w.me));
  std::vector<LeafShare> shares(n);
  // Leaf parallelism: the leaf's playouts are split over every thread of the
  // job; this thread runs its share while the others run theirs.
  auto evaluate = [&](const G& leaf, Counts* amaf) -> std::uint32_t {
    if (n == 1) return playouts(leaf, p, w.rng, amaf);
    Synchronizer sync;
    const bool rave = amaf != nullptr;
    for (std::uint32_t i = 1; i < n; ++i) {
      const std::uint32_t share = p / n + (i < p % n);
      if (share == 0) continue;
      const std::uint64_t seed = w.rng();
      auto run_share = [leaf, share, seed, rave] {
        Rng rng(seed);
        LeafShare out;
        out.won = Engine::current().playouts(leaf, share, rng, rave ? &out.amaf : nullptr);
        return out;
      };
      count_call(thread_at(i), sizeof run_share + (rave ? sizeof(LeafShare) : sizeof(std::uint32_t)));
      rdmx::call_return(thread_at(i), run_share, rdmx::into(shares[i], sync));
    }
    std::uint32_t won = playouts(leaf, p / n + (0 < p % n), w.rng, amaf);
    sync.wait();
    for (std::uint32_t i = 1; i < n; ++i) {
      won += std::exchange(shares[i].won, 0);
      if constexpr (AmafGame<G>)
        if (amaf != nullptr) amaf->merge(shares[i].amaf);
    }
    return won;
  };
  Result r;
  const std::uint64_t total = budget.rollouts ? budget.rollouts : UINT64_MAX;
  const std::uint64_t phase = std::uint64_t{options_.phase} * n;
  std::uint64_t done = 0;
  double elapsed = 0;
  while (done < total && (budget.seconds <= 0 || elapsed < budget.seconds)) {
    local_rollout(root, evaluate);
    ++done;
    if (done % 64 == 0 || done == total) elapsed = seconds_since(t0);
    if (progress && done % phase == 0) {
      collect(root, r);
      r.rollouts = done;
      r.seconds = elapsed;
      progress(r);
    }
  }
  collect(root, r);
  r.rollouts = done;
  r.seconds = seconds_since(t0);
  finish(false).add_to(r);
  finish_result(r);
  return r;
}

template <Game G>
typename Engine<G>::RootStats Engine<G>::root_search(const G& position, Budget budget) {
  Worker& w = worker();
  auto& root = *w.owned.emplace_back(std::make_unique<Node<G>>(position, w.me));
  const auto t0 = clock::now();
  RootStats out;
  const std::uint64_t total = budget.rollouts ? budget.rollouts : UINT64_MAX;
  for (; out.rollouts < total; ++out.rollouts) {
    if (out.rollouts % 64 == 0) {
      // Progress now and then: the driver's calls to the other threads may
      // still need it to leave (a lazily made endpoint is wired up by
      // progress on both sides), and they would start only after this loop.
      rdmx::progress();
      if (budget.seconds > 0 && seconds_since(t0) >= budget.seconds) break;
    }
    local_rollout(root, [&](const G& leaf, Counts* amaf) { return playouts(leaf, options_.playouts, w.rng, amaf); });
  }
  Result r;
  collect(root, r);
  out.count = static_cast<std::uint32_t>(r.moves.size());
  std::copy(r.moves.begin(), r.moves.end(), out.moves);
  out.stats = finish(true);
  return out;
}

template <Game G>
typename Engine<G>::Result Engine<G>::search_root(const G& position, Budget budget) {
  const auto t0 = clock::now();
  const std::uint32_t n = total_threads();
  // Every thread searches its own tree with an equal share of the rollouts.
  Budget share = budget;
  if (budget.rollouts) share.rollouts = (budget.rollouts + n - 1) / n;
  std::vector<RootStats> stats(n);
  Synchronizer sync;
  for (std::uint32_t i = 1; i < n; ++i)
    rdmx::call_return(thread_at(i), [position, share] { return Engine::current().root_search(position, share); },
                      rdmx::into(stats[i], sync));
  stats[0] = root_search(position, share);
  sync.wait();
  Result r;
  std::vector<typename Result::Move> merged;
  for (const RootStats& s : stats) {
    r.rollouts += s.rollouts;
    s.stats.add_to(r);
    for (std::uint32_t i = 0; i < s.count; ++i) {
      auto it = std::find_if(merged.begin(), merged.end(), [&](auto& m) { return m.move == s.moves[i].move; });
      if (it == merged.end()) merged.push_back(s.moves[i]);
      else it->visits += s.moves[i].visits, it->wins += s.moves[i].wins;
    }
  }
  r.moves = std::move(merged);
  rank(r);
  r.seconds = seconds_since(t0);
  finish_result(r);
  return r;
}

template <Game G>
void Engine<G>::collect(Node<G>& root, Result& r) const {
  r.moves.clear();
  if (auto* children = root.children.load(std::memory_order_acquire)) {
    for (auto& s : children->slots) {
      const std::uint32_t v = s.visits.load(std::memory_order_relaxed);
      if (v > 0) r.moves.push_back({s.move, v, s.wins.load(std::memory_order_relaxed)});
    }
  }
  rank(r);
}

template <Game G>
void Engine<G>::rank(Result& r) const {
  std::sort(r.moves.begin(), r.moves.end(),
            [](auto& a, auto& b) { return a.visits != b.visits ? a.visits > b.visits : a.wins > b.wins; });
  if (r.moves.empty()) return;
  auto best = r.moves.begin();
  if (options_.final_choice == FinalChoice::best_mean)
    best = std::max_element(r.moves.begin(), r.moves.end(), [](auto& a, auto& b) {
      return double(a.wins) / a.visits < double(b.wins) / b.visits;
    });
  r.best = best->move;
  r.win_rate = best->wins / double(best->visits);
}

inline Parallelism parse_parallelism(const std::string& text) {
  if (text == "tree") return Parallelism::tree;
  if (text == "root") return Parallelism::root;
  if (text == "leaf") return Parallelism::leaf;
  if (text == "sequential") return Parallelism::sequential;
  throw std::invalid_argument("unknown parallelism '" + text + "' (tree, root, leaf, sequential)");
}
inline FinalChoice parse_final_choice(const std::string& text) {
  if (text == "visits") return FinalChoice::most_visits;
  if (text == "mean") return FinalChoice::best_mean;
  throw std::invalid_argument("unknown final move choice '" + text + "' (visits, mean)");
}
inline const char* to_string(FinalChoice f) { return f == FinalChoice::most_visits ? "visits" : "mean"; }

inline const char* to_string(Parallelism p) {
  switch (p) {
    case Parallelism::tree: return "tree";
    case Parallelism::root: return "root";
    case Parallelism::leaf: return "leaf";
    case Parallelism::sequential: return "sequential";
  }
  return "?";
}

}  // namespace rdmx::mcts
