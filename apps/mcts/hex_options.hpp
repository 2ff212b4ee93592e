// What rdmx-hex and the benchmarks let a user switch by name: Hex's playout
// knowledge and the framework's RAVE and priors (docs/mcts-hex.md, "What Hex knows").
//   --knowledge all | none | bridge,edge,early-win,rave,prior
#pragma once
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "mcts/hex.hpp"
#include "mcts/search.hpp"

namespace rdmx::mcts {

struct HexKnowledge {
  std::uint8_t playouts = 0;  // Hex::Knowledge flags, set on every position searched
  bool rave = false;
  bool prior = false;

  // What "all" means: everything that made the engine stronger at equal time
  // (early-win is slower than the one check of a full board: docs/results/mcts.md).
  static constexpr const char* all = "bridge,edge,rave,prior";

  static HexKnowledge parse(const std::string& list) {
    HexKnowledge k;
    std::istringstream in(list == "all" ? std::string(all) : list == "none" ? std::string() : list);
    for (std::string item; std::getline(in, item, ',');) {
      if (item == "bridge") k.playouts |= Hex::save_bridge;
      else if (item == "edge") k.playouts |= Hex::save_edge;
      else if (item == "early-win") k.playouts |= Hex::early_win;
      else if (item == "rave") k.rave = true;
      else if (item == "prior") k.prior = true;
      else throw std::invalid_argument("--knowledge: unknown item '" + item + "' (bridge, edge, early-win, rave, prior, all, none)");
    }
    return k;
  }

  std::string to_string() const {
    std::string text;
    auto add = [&](bool on, const char* name) {
      if (on) (text += text.empty() ? "" : ",") += name;
    };
    add(playouts & Hex::save_bridge, "bridge");
    add(playouts & Hex::save_edge, "edge");
    add(playouts & Hex::early_win, "early-win");
    add(rave, "rave");
    add(prior, "prior");
    return text.empty() ? "none" : text;
  }

  // Settings a user gave, which apply() leaves alone.
  struct Given {
    bool c = false, prior_games = false, playouts = false;
  };
  // The search's side: RAVE, priors (32 games) and, with either, the
  // exploration constant 0.05 (their values already rank the moves: each
  // step of exploration less was stronger at equal rollouts, down to 0.05;
  // the seed's 0.8 without) and 4 playouts per leaf (the tree learns more
  // from four times the nodes than from better leaf values: 70 % of 20
  // games against 16 per leaf at equal time). Both: docs/results/mcts.md.
  void apply(SearchOptions& o) const { apply(o, Given{}); }
  void apply(SearchOptions& o, Given given) const {
    o.rave = rave;
    if (!prior) o.prior_games = 0;
    else if (!given.prior_games) o.prior_games = 32;
    if (!given.c) o.c = o.guided() ? 0.05 : 0.8;
    if (!given.playouts) o.playouts = o.guided() ? 4 : 16;
  }
};

}  // namespace rdmx::mcts
