// rdmx-bench-mcts: the distributed MCTS on Hex (Seriema 5.3.3, Fig. 3).
// One job = one layout (processes from the launcher, --rdmx-threads=T).
// Each variant searches the empty board for --seconds; every line reports
// rollouts/s and (completions + visits)/s, and its speedup over the
// sequential search measured in the same run. --match G then plays G games
// between tree parallelism on this layout and the sequential search, both at
// the same rollouts per move: the distributed search must be as strong.
// Each line also gives the costs per rollout: calls that crossed processes
// (the network's messages), the bytes they carried, and the CPU time of the
// whole job (every process, every thread, idle polling included).
// --knowledge LIST (as rdmx-hex's; default none, the seed's plain search)
// measures the same with Hex's playout knowledge and RAVE or priors, alone
// or together; every line says which, and the playouts per second
// (--amaf-batch B: SearchOptions::amaf_batch, 1 for none; --spread-leaves:
// SearchOptions::spread_leaves, the seed's leaf placement; --spread-depth D|all:
// SearchOptions::spread_depth, all the seed's node placement; --rings-over-tcp:
// SearchOptions::rings_over_tcp, the seed's calls over TCP).
// --variants LIST runs only those of sequential, tree/trad, tree/ovfl, root
// and leaf (without sequential, speedups read 0): one variant alone under
// a profiler. scripts/bench mcts runs it for each layout it lists.
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "json.hpp"
#include "mcts/hex.hpp"
#include "mcts/hex_options.hpp"
#include "mcts/search.hpp"

using namespace rdmx;
using namespace rdmx::mcts;

namespace {

struct Config {
  double seconds = 3;
  int size = 11;
  int match_games = 0;
  std::uint64_t match_rollouts = 1000;
  int match_size = 7;
  std::uint32_t inflight = SearchOptions{}.inflight;
  std::uint32_t inflight_floor = SearchOptions{}.inflight_floor;
  std::uint32_t playouts = 0;  // 0: what the knowledge chooses
  std::uint32_t virtual_loss = SearchOptions{}.virtual_loss;
  std::uint32_t amaf_batch = SearchOptions{}.amaf_batch;
  bool spread_leaves = false;
  std::uint32_t spread_depth = SearchOptions{}.spread_depth;
  bool rings_over_tcp = false;
  HexKnowledge knowledge;
  std::string variants;  // comma-separated names to run; empty: all
  bool runs(const char* name) const {
    if (variants.empty()) return true;
    const std::string list = "," + variants + ",";
    return list.find("," + std::string(name) + ",") != std::string::npos;
  }
};

Config parse(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--quick") {
      c.seconds = 0.3;
      c.match_games = 4;
      c.match_rollouts = 200;
      c.match_size = 5;
    } else if (a == "--seconds") {
      c.seconds = std::stod(next());
    } else if (a == "--size") {
      c.size = std::stoi(next());
    } else if (a == "--match") {
      c.match_games = std::stoi(next());
    } else if (a == "--match-rollouts") {
      c.match_rollouts = std::stoull(next());
    } else if (a == "--match-size") {
      c.match_size = std::stoi(next());
    } else if (a == "--inflight") {
      c.inflight = static_cast<std::uint32_t>(std::stoul(next()));
    } else if (a == "--inflight-floor") {
      c.inflight_floor = static_cast<std::uint32_t>(std::stoul(next()));
    } else if (a == "--knowledge") {
      c.knowledge = HexKnowledge::parse(next());
    } else if (a == "--playouts") {
      c.playouts = static_cast<std::uint32_t>(std::stoul(next()));
    } else if (a == "--variants") {
      c.variants = next();
    } else if (a == "--virtual-loss") {
      c.virtual_loss = static_cast<std::uint32_t>(std::stoul(next()));
    } else if (a == "--spread-leaves") {
      c.spread_leaves = true;
    } else if (a == "--rings-over-tcp") {
      c.rings_over_tcp = true;
    } else if (a == "--spread-depth") {
      const std::string d = next();
      c.spread_depth = d == "all" ? SearchOptions::no_spread_limit : static_cast<std::uint32_t>(std::stoul(d));
    } else if (a == "--amaf-batch") {
      c.amaf_batch = static_cast<std::uint32_t>(std::stoul(next()));
    } else {
      throw std::invalid_argument("unknown option " + a);
    }
  }
  return c;
}

// Plays one game; `tree_colour` moves with tree parallelism, the other with the sequential search.
Player play_game(Engine<Hex>& engine, Hex h, Player tree_colour, std::uint64_t rollouts) {
  while (!h.terminal()) {
    engine.options().parallelism = h.to_move() == tree_colour ? Parallelism::tree : Parallelism::sequential;
    h.play(engine.search(h, Budget{rollouts, 0}).best);
  }
  return h.winner();
}

// CPU seconds this process has used, all its threads.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return double(t.tv_sec) + t.tv_usec * 1e-6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

// CPU seconds used so far by every process of the job, asked of each
// process's thread 0 (which serves calls while the driver searches).
double job_cpu_seconds() {
  Job& job = Job::current();
  std::vector<double> each(job.size());
  Synchronizer sync;
  for (std::uint32_t p = 1; p < job.size(); ++p)
    call_return(ThreadId{p, 0}, [] { return process_cpu_seconds(); }, into(each[p], sync));
  each[0] = process_cpu_seconds();
  sync.wait();
  double total = 0;
  for (double c : each) total += c;
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Job job(argc, argv);
    const Config cfg = parse(argc, argv);
    const unsigned cores = std::thread::hardware_concurrency();
    bench::JsonLine common;
    common.field("bench", "mcts")
        .field("layout", job.layout().to_string())
        .field("processes", job.size())
        .field("threads", job.total_threads())
        .field("cores", cores)
        .field("oversubscribed", Engine<Hex>::oversubscribed());

    SearchOptions options;
    options.inflight = cfg.inflight;
    options.inflight_floor = cfg.inflight_floor;
    options.playouts = cfg.playouts;
    options.virtual_loss = cfg.virtual_loss;
    options.amaf_batch = cfg.amaf_batch;
    options.spread_leaves = cfg.spread_leaves;
    options.spread_depth = cfg.spread_depth;
    options.rings_over_tcp = cfg.rings_over_tcp;
    cfg.knowledge.apply(options, {.playouts = cfg.playouts != 0});
    common.field("rollouts_in_flight", options.rollouts_in_flight(job.total_threads()))
        .field("knowledge", cfg.knowledge.to_string())
        .field("playouts_per_rollout", options.playouts)
        .field("virtual_loss", options.virtual_loss)
        .field("amaf_batch", options.amaf_batch)
        .field("spread_leaves", options.spread_leaves)
        .field("spread_depth", options.spread_depth)
        .field("rings_over_tcp", options.rings_over_tcp);
    Engine<Hex> engine(options);
    job.run([&](ThreadId me) {
      engine.run(me, [&] {
        Hex empty(cfg.size);
        empty.set_knowledge(cfg.knowledge.playouts);
        double sequential = 0;
        struct Variant {
          const char* name;
          Parallelism parallelism;
          Aggregation aggregation;
        };
        const Variant variants[] = {{"sequential", Parallelism::sequential, Aggregation::trad},
                                    {"tree/trad", Parallelism::tree, Aggregation::trad},
                                    {"tree/ovfl", Parallelism::tree, Aggregation::ovfl},
                                    {"root", Parallelism::root, Aggregation::trad},
                                    {"leaf", Parallelism::leaf, Aggregation::trad}};
        // Warm up: endpoints and messengers between every pair of threads are
        // made on first use (service-call round trips), which is not what we measure.
        engine.options().parallelism = Parallelism::tree;
        engine.search(empty, Budget{0, std::min(0.5, cfg.seconds)});
        for (const Variant& v : variants) {
          if (!cfg.runs(v.name)) continue;
          engine.options().parallelism = v.parallelism;
          engine.options().aggregation = v.aggregation;
          const double cpu0 = job_cpu_seconds();
          const auto r = engine.search(empty, Budget{0, cfg.seconds});
          const double cpu = job_cpu_seconds() - cpu0;
          if (v.parallelism == Parallelism::sequential) sequential = r.rollouts_per_second();
          const double per = r.rollouts > 0 ? 1.0 / double(r.rollouts) : 0;
          common.with("variant", v.name)
              .field("size", cfg.size)
              .field("metric", "rollouts_per_s")
              .field("value", r.rollouts_per_second())
              .field("rollouts_per_s", r.rollouts_per_second())
              .field("playouts_per_s", r.rollouts_per_second() * options.playouts)
              .field("max_depth", r.max_depth)
              .field("mean_depth", r.mean_depth)
              .field("steps_per_s", r.steps_per_second())
              .field("speedup_vs_sequential", sequential > 0 ? r.rollouts_per_second() / sequential : 0.0)
              .field("rollouts", r.rollouts)
              .field("seconds", r.seconds)
              .field("deferred", r.deferred)
              .field("remote_calls", r.remote_calls)
              .field("process_calls", r.process_calls)
              .field("call_bytes", r.call_bytes)
              .field("messages_per_rollout", double(r.process_calls) * per)
              .field("bytes_per_rollout", double(r.call_bytes) * per)
              .field("cpu_s", cpu)
              .field("cpu_s_per_rollout", cpu * per)
              .field("peak_in_flight", r.peak_in_flight)
              .print();
        }
        if (cfg.match_games <= 0) return;
        // Openings: one random stone each, so games differ; each opening is
        // played twice with colours swapped, which cancels Hex's first-move advantage.
        engine.options().aggregation = Aggregation::trad;
        Rng rng(2026);
        int tree_wins = 0, games = 0, pairs_swept_by_tree = 0, pairs_swept_by_sequential = 0;
        for (; games < cfg.match_games; games += 2) {
          Hex opening(cfg.match_size);
          opening.set_knowledge(cfg.knowledge.playouts);
          Hex::Move moves[Hex::max_moves];
          for (int i = 0; i < 2; ++i) opening.play(moves[rng.below(static_cast<std::uint32_t>(opening.legal_moves(moves)))]);
          const bool a = play_game(engine, opening, Hex::black, cfg.match_rollouts) == Hex::black;
          const bool b = play_game(engine, opening, Hex::white, cfg.match_rollouts) == Hex::white;
          tree_wins += a + b;
          pairs_swept_by_tree += a && b;
          pairs_swept_by_sequential += !a && !b;
          if ((games + 2) % 20 == 0)
            std::fprintf(stderr, "match: %d games, tree parallelism won %d\n", games + 2, tree_wins);
        }
        const double p = double(tree_wins) / games;
        common.with("variant", "match-tree-vs-sequential")
            .field("size", cfg.match_size)
            .field("metric", "win_rate")
            .field("value", p)
            .field("rollouts_per_move", cfg.match_rollouts)
            .field("games", games)
            .field("tree_wins", tree_wins)
            .field("win_rate", p)
            .field("ci95", 1.96 * std::sqrt(0.25 / games))  // half-width at p = 0.5
            .field("pairs_swept_by_tree", pairs_swept_by_tree)
            .field("pairs_swept_by_sequential", pairs_swept_by_sequential)
            .print();
      });
    });
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdmx-bench-mcts: %s\n", e.what());
    return 1;
  }
}
