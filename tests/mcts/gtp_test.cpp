#include "mcts/gtp.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace rdmx::mcts {
namespace {

// A fake engine: plays the first empty cell and records who it played for
// and what it was asked.
struct FirstLegal {
  std::vector<Player>* asked;
  std::vector<MoveRequest>* requests = nullptr;
  MoveChoice operator()(const Hex& position, const MoveRequest& request) const {
    asked->push_back(position.to_move());
    if (requests != nullptr) requests->push_back(request);
    std::array<Hex::Move, Hex::max_moves> moves;
    if (position.legal_moves(moves) == 0) return MoveChoice::resignation();
    return MoveChoice::at(moves[0]);
  }
};

class Gtp : public ::testing::Test {
 protected:
  std::vector<Player> asked;
  GtpSession gtp{FirstLegal{&asked}, "rdmx-hex", "0.1", 5};

  Hex::Move cell(std::string_view name) const { return *gtp.position().parse_move(name); }
};

TEST_F(Gtp, Identity) {
  EXPECT_EQ(gtp.execute("protocol_version"), "= 2\n\n");
  EXPECT_EQ(gtp.execute("name"), "= rdmx-hex\n\n");
  EXPECT_EQ(gtp.execute("version"), "= 0.1\n\n");
  EXPECT_FALSE(gtp.quit());
}

TEST_F(Gtp, Ids) {
  EXPECT_EQ(gtp.execute("12 name"), "=12 rdmx-hex\n\n");
  EXPECT_EQ(gtp.execute("7 frobnicate"), "?7 unknown command\n\n");
  EXPECT_EQ(gtp.execute("0 play b a1"), "=0 \n\n");
  EXPECT_EQ(gtp.execute("3 play b a1"), "?3 cell a1 is occupied\n\n");
  EXPECT_EQ(gtp.execute("4"), "?4 missing command\n\n");
}

TEST_F(Gtp, UnknownCommand) {
  EXPECT_EQ(gtp.execute("frobnicate"), "? unknown command\n\n");
  EXPECT_EQ(gtp.execute("NAME"), "? unknown command\n\n");  // command names are case-sensitive
}

TEST_F(Gtp, CommentsBlankLinesAndWhitespace) {
  EXPECT_EQ(gtp.execute(""), "");
  EXPECT_EQ(gtp.execute("   \t "), "");
  EXPECT_EQ(gtp.execute("# a comment"), "");
  EXPECT_EQ(gtp.execute("name # trailing comment"), "= rdmx-hex\n\n");
  EXPECT_EQ(gtp.execute("\t name \r"), "= rdmx-hex\n\n");
  EXPECT_EQ(gtp.execute("na\x01me"), "= rdmx-hex\n\n");  // control characters are dropped
  EXPECT_EQ(gtp.execute("play  b\t\tc3"), "= \n\n");
  EXPECT_EQ(gtp.position().stone(cell("c3")), Hex::black);
}

TEST_F(Gtp, KnownAndListedCommands) {
  const std::vector<std::string> required = {
      "protocol_version", "name",       "version",    "known_command", "list_commands", "quit",
      "boardsize",        "clear_board", "play",      "genmove",       "undo",          "showboard",
      "final_score",      "time_settings", "time_left", "param_game",  "hexgui-analyze_commands"};
  const std::string list = gtp.execute("list_commands");
  ASSERT_EQ(list.substr(0, 2), "= ");
  ASSERT_EQ(list.substr(list.size() - 2), "\n\n");
  std::vector<std::string> listed;
  std::istringstream lines(list.substr(2, list.size() - 4));
  for (std::string line; std::getline(lines, line);) listed.push_back(line);
  for (const std::string& command : required) {
    EXPECT_NE(std::find(listed.begin(), listed.end(), command), listed.end()) << command;
    EXPECT_EQ(gtp.execute("known_command " + command), "= true\n\n");
  }
  for (const std::string& command : listed) {
    EXPECT_EQ(gtp.execute("known_command " + command), "= true\n\n");
    GtpSession fresh(FirstLegal{&asked}, "x", "y");
    EXPECT_NE(fresh.execute(command), "? unknown command\n\n") << command;
  }
  EXPECT_EQ(gtp.execute("known_command frobnicate"), "= false\n\n");
  EXPECT_EQ(gtp.execute("known_command"), "? wrong number of arguments\n\n");
}

TEST_F(Gtp, Boardsize) {
  ASSERT_EQ(gtp.execute("play b a1"), "= \n\n");
  EXPECT_EQ(gtp.execute("boardsize 7"), "= \n\n");
  EXPECT_EQ(gtp.position().size(), 7);
  EXPECT_EQ(gtp.position().moves_played(), 0);
  EXPECT_EQ(gtp.execute("undo"), "? cannot undo\n\n");  // a new board has no history
  EXPECT_EQ(gtp.execute("boardsize 9 9"), "= \n\n");
  EXPECT_EQ(gtp.position().size(), 9);
  for (const char* bad : {"boardsize 9 8", "boardsize 0", "boardsize 20", "boardsize -1"})
    EXPECT_EQ(gtp.execute(bad), "? unacceptable size\n\n") << bad;
  EXPECT_EQ(gtp.execute("boardsize x"), "? boardsize is not an integer\n\n");
  EXPECT_EQ(gtp.execute("boardsize 5x"), "? boardsize is not an integer\n\n");
  EXPECT_EQ(gtp.execute("boardsize"), "? wrong number of arguments\n\n");
  EXPECT_EQ(gtp.execute("boardsize 5 5 5"), "? wrong number of arguments\n\n");
  EXPECT_EQ(gtp.position().size(), 9);
  EXPECT_EQ(gtp.execute("boardsize 19"), "= \n\n");
  EXPECT_EQ(gtp.execute("boardsize 1"), "= \n\n");
}

TEST_F(Gtp, ClearBoard) {
  gtp.execute("play b a1");
  EXPECT_EQ(gtp.execute("clear_board"), "= \n\n");
  EXPECT_EQ(gtp.position().size(), 5);
  EXPECT_EQ(gtp.position().moves_played(), 0);
  EXPECT_EQ(gtp.position().to_move(), Hex::black);
  EXPECT_EQ(gtp.execute("undo"), "? cannot undo\n\n");
}

TEST_F(Gtp, Play) {
  EXPECT_EQ(gtp.execute("play b a1"), "= \n\n");
  EXPECT_EQ(gtp.position().stone(cell("a1")), Hex::black);
  EXPECT_EQ(gtp.position().to_move(), Hex::white);
  EXPECT_EQ(gtp.execute("play W B2"), "= \n\n");
  EXPECT_EQ(gtp.position().stone(cell("b2")), Hex::white);
  EXPECT_EQ(gtp.execute("play BLACK c3"), "= \n\n");
  EXPECT_EQ(gtp.execute("play black d4"), "= \n\n");  // either colour may play at any time
  EXPECT_EQ(gtp.position().stone(cell("d4")), Hex::black);
  EXPECT_EQ(gtp.position().to_move(), Hex::white);
  EXPECT_EQ(gtp.execute("play white e5"), "= \n\n");
  EXPECT_EQ(gtp.position().to_move(), Hex::black);
  EXPECT_EQ(gtp.position().moves_played(), 5);

  EXPECT_EQ(gtp.execute("play w a1"), "? cell a1 is occupied\n\n");
  EXPECT_EQ(gtp.execute("play x a2"), "? invalid color 'x'\n\n");
  EXPECT_EQ(gtp.execute("play bl a2"), "? invalid color 'bl'\n\n");
  EXPECT_EQ(gtp.execute("play b f1"), "? invalid move 'f1'\n\n");  // off a 5x5 board
  EXPECT_EQ(gtp.execute("play b a6"), "? invalid move 'a6'\n\n");
  EXPECT_EQ(gtp.execute("play b z9"), "? invalid move 'z9'\n\n");
  EXPECT_EQ(gtp.execute("play b"), "? wrong number of arguments\n\n");
  EXPECT_EQ(gtp.execute("play b a2 a3"), "? wrong number of arguments\n\n");
  EXPECT_EQ(gtp.position().moves_played(), 5);
  EXPECT_EQ(gtp.position().stone(cell("a2")), Hex::empty);
}

TEST_F(Gtp, Genmove) {
  EXPECT_EQ(gtp.execute("genmove w"), "= a1\n\n");
  EXPECT_EQ(gtp.position().stone(cell("a1")), Hex::white);
  EXPECT_EQ(gtp.position().to_move(), Hex::black);
  EXPECT_EQ(gtp.execute("5 genmove White"), "=5 b1\n\n");  // white again: genmove sets the side to move
  EXPECT_EQ(gtp.position().stone(cell("b1")), Hex::white);
  EXPECT_EQ(gtp.execute("genmove b"), "= c1\n\n");
  EXPECT_EQ(gtp.position().stone(cell("c1")), Hex::black);
  EXPECT_EQ(asked, (std::vector<Player>{Hex::white, Hex::white, Hex::black}));
  EXPECT_EQ(gtp.execute("genmove x"), "? invalid color 'x'\n\n");
  EXPECT_EQ(gtp.execute("genmove"), "? wrong number of arguments\n\n");
  EXPECT_EQ(asked.size(), 3u);
}

TEST_F(Gtp, GenmoveResigns) {
  GtpSession resigning([](const Hex&, const MoveRequest&) { return MoveChoice::resignation(); }, "r", "1");
  EXPECT_EQ(resigning.execute("genmove b"), "= resign\n\n");
  EXPECT_EQ(resigning.position().moves_played(), 0);
  EXPECT_EQ(resigning.execute("final_score"), "= W+\n\n");
  EXPECT_EQ(resigning.execute("undo"), "= \n\n");  // the resignation is taken back
  EXPECT_EQ(resigning.execute("final_score"), "? the game is not over\n\n");
}

TEST_F(Gtp, GenmoveRejectsAnIllegalChoice) {
  GtpSession stubborn([](const Hex&, const MoveRequest&) { return MoveChoice::at(0); }, "s", "1", 3);
  EXPECT_EQ(stubborn.execute("play b a1"), "= \n\n");
  const std::uint64_t hash = stubborn.position().hash();
  EXPECT_EQ(stubborn.execute("genmove b"), "? the engine chose an illegal move\n\n");
  EXPECT_EQ(stubborn.position().hash(), hash);
  GtpSession off_board([](const Hex&, const MoveRequest&) { return MoveChoice::at(9); }, "o", "1", 3);
  EXPECT_EQ(off_board.execute("genmove w"), "? the engine chose an illegal move\n\n");
  EXPECT_EQ(off_board.position().moves_played(), 0);
  GtpSession swapper([](const Hex&, const MoveRequest&) { return MoveChoice::swap_pieces(); }, "w", "1", 3);
  EXPECT_EQ(swapper.execute("genmove b"), "? the engine chose swap-pieces where it is not allowed\n\n");
  EXPECT_EQ(swapper.position().moves_played(), 0);
}

TEST_F(Gtp, EngineFailuresAreResponses) {
  GtpSession failing([](const Hex&, const MoveRequest&) -> MoveChoice { throw std::runtime_error("no search today"); },
                     "f", "1", 3);
  EXPECT_EQ(failing.execute("7 genmove b"), "?7 engine error: no search today\n\n");
  EXPECT_EQ(failing.position().moves_played(), 0);
  EXPECT_EQ(failing.execute("name"), "= f\n\n");  // the session goes on
}

TEST_F(Gtp, GameOver) {
  gtp.execute("boardsize 2");
  EXPECT_EQ(gtp.execute("play b a1"), "= \n\n");
  EXPECT_EQ(gtp.execute("final_score"), "? the game is not over\n\n");
  EXPECT_EQ(gtp.execute("play b a2"), "= \n\n");  // a1-a2 joins top and bottom
  ASSERT_TRUE(gtp.position().terminal());
  EXPECT_EQ(gtp.position().winner(), Hex::black);
  EXPECT_EQ(gtp.execute("final_score"), "= B+\n\n");
  EXPECT_EQ(gtp.execute("genmove w"), "= resign\n\n");
  EXPECT_TRUE(asked.empty());
  // A referee or GUI may go on placing stones: the winner stays.
  EXPECT_EQ(gtp.execute("play w b1"), "= \n\n");
  EXPECT_EQ(gtp.execute("final_score"), "= B+\n\n");
  EXPECT_EQ(gtp.execute("play w b1"), "? cell b1 is occupied\n\n");
  EXPECT_EQ(gtp.execute("undo"), "= \n\n");
  EXPECT_EQ(gtp.execute("undo"), "= \n\n");
  EXPECT_FALSE(gtp.position().terminal());
  EXPECT_EQ(gtp.execute("play w b1"), "= \n\n");
}

TEST_F(Gtp, Resignation) {
  EXPECT_EQ(gtp.execute("play b c3"), "= \n\n");
  EXPECT_EQ(gtp.execute("play w resign"), "= \n\n");
  EXPECT_EQ(gtp.execute("final_score"), "= B+\n\n");
  EXPECT_EQ(gtp.execute("genmove b"), "= resign\n\n");  // nothing left to play
  EXPECT_TRUE(asked.empty());
  EXPECT_EQ(gtp.position().moves_played(), 1);
  EXPECT_EQ(gtp.execute("play b RESIGN"), "= \n\n");  // a second resignation changes nothing
  EXPECT_EQ(gtp.execute("final_score"), "= B+\n\n");
  EXPECT_EQ(gtp.execute("undo"), "= \n\n");
  EXPECT_EQ(gtp.execute("undo"), "= \n\n");
  EXPECT_EQ(gtp.execute("final_score"), "? the game is not over\n\n");
  EXPECT_EQ(gtp.execute("clear_board"), "= \n\n");
  EXPECT_EQ(gtp.execute("play b resign"), "= \n\n");
  EXPECT_EQ(gtp.execute("final_score"), "= W+\n\n");
  EXPECT_EQ(gtp.execute("clear_board"), "= \n\n");
  EXPECT_EQ(gtp.execute("final_score"), "? the game is not over\n\n");
}

TEST_F(Gtp, SwapPieces) {
  EXPECT_EQ(gtp.execute("param_game"), "= \n[bool] allow_swap 0\n\n");
  EXPECT_EQ(gtp.execute("play b b3"), "= \n\n");
  EXPECT_EQ(gtp.execute("play w swap-pieces"), "? swap is not allowed (param_game allow_swap 1 allows it)\n\n");
  EXPECT_EQ(gtp.execute("param_game allow_swap 1"), "= \n\n");
  EXPECT_TRUE(gtp.swap());
  EXPECT_EQ(gtp.execute("param_game"), "= \n[bool] allow_swap 1\n\n");
  EXPECT_EQ(gtp.execute("play b swap-pieces"), "? swap-pieces is only the second move of a game\n\n");
  // Black's b3 becomes white's c2 (mirrored across the long diagonal); black moves.
  EXPECT_EQ(gtp.execute("play w swap-pieces"), "= \n\n");
  EXPECT_EQ(gtp.position().stone(cell("b3")), Hex::empty);
  EXPECT_EQ(gtp.position().stone(cell("c2")), Hex::white);
  EXPECT_EQ(gtp.position().moves_played(), 1);
  EXPECT_EQ(gtp.position().to_move(), Hex::black);
  EXPECT_EQ(gtp.execute("play w swap-pieces"), "? swap-pieces is only the second move of a game\n\n");
  EXPECT_EQ(gtp.execute("undo"), "= \n\n");
  EXPECT_EQ(gtp.position().stone(cell("b3")), Hex::black);
  EXPECT_EQ(gtp.position().to_move(), Hex::white);
  EXPECT_EQ(gtp.execute("play w a1"), "= \n\n");
  EXPECT_EQ(gtp.execute("play b swap-pieces"), "? swap-pieces is only the second move of a game\n\n");
  for (const char* bad : {"param_game allow_swap", "param_game allow_swap maybe", "param_game komi 7", "param_game a b c"})
    EXPECT_EQ(gtp.execute(bad).substr(0, 2), "? ") << bad;
  EXPECT_EQ(gtp.execute("param_game allow_swap off"), "= \n\n");
  EXPECT_FALSE(gtp.swap());
}

TEST_F(Gtp, EngineMaySwap) {
  std::vector<MoveRequest> requests;
  auto engine = [&](const Hex& h, const MoveRequest& r) {
    requests.push_back(r);
    return r.may_swap ? MoveChoice::swap_pieces() : MoveChoice::at(h.size() * h.size() - 1);
  };
  GtpSession s(engine, "e", "1", 5);
  s.set_swap(true);
  EXPECT_EQ(s.execute("genmove b"), "= e5\n\n");
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_FALSE(requests[0].may_swap);
  EXPECT_TRUE(requests[0].opponent_may_swap);  // the first move of a game with swap
  EXPECT_EQ(s.execute("genmove w"), "= swap-pieces\n\n");
  EXPECT_TRUE(requests[1].may_swap);
  EXPECT_FALSE(requests[1].opponent_may_swap);
  EXPECT_EQ(s.position().stone(*s.position().parse_move("e5")), Hex::white);  // e5 is on the diagonal
  EXPECT_EQ(s.position().to_move(), Hex::black);
  EXPECT_EQ(s.execute("genmove b"), "? the engine chose an illegal move\n\n");  // e5 is taken
  s.set_swap(false);
  EXPECT_EQ(s.execute("clear_board"), "= \n\n");
  EXPECT_EQ(s.execute("play b a1"), "= \n\n");
  EXPECT_EQ(s.execute("genmove w"), "= e5\n\n");
  EXPECT_FALSE(requests.back().may_swap);
}

TEST_F(Gtp, Undo) {
  const Hex start = gtp.position();
  gtp.execute("play b c3");
  const Hex after_one = gtp.position();
  gtp.execute("play w a1");
  EXPECT_EQ(gtp.execute("undo"), "= \n\n");
  EXPECT_EQ(gtp.position().hash(), after_one.hash());
  EXPECT_EQ(gtp.position().stone(cell("a1")), Hex::empty);
  EXPECT_EQ(gtp.position().moves_played(), 1);
  // genmove changes the side to move; undo restores it with the stones.
  EXPECT_EQ(gtp.execute("genmove b"), "= a1\n\n");
  EXPECT_EQ(gtp.execute("undo"), "= \n\n");
  EXPECT_EQ(gtp.position().hash(), after_one.hash());
  EXPECT_EQ(gtp.position().to_move(), Hex::white);
  EXPECT_EQ(gtp.execute("undo"), "= \n\n");
  EXPECT_EQ(gtp.position().hash(), start.hash());
  EXPECT_EQ(gtp.position().moves_played(), 0);
  EXPECT_EQ(gtp.execute("undo"), "? cannot undo\n\n");
  EXPECT_EQ(gtp.execute("undo now"), "? wrong number of arguments\n\n");
}

TEST_F(Gtp, Showboard) {
  gtp.execute("play b a1");
  gtp.execute("play w e5");
  const std::string board = gtp.position().board_text();
  EXPECT_EQ(gtp.execute("showboard"), "= \n" + board + "\n");
  EXPECT_EQ(gtp.execute("9 showboard"), "=9 \n" + board + "\n");
  EXPECT_NE(board.find(" 1 X . . . . 1\n"), std::string::npos) << board;
  EXPECT_NE(board.find("5 . . . . O 5\n"), std::string::npos) << board;
}

TEST_F(Gtp, HexGuiAnalyzeCommands) {
  // Each line is type/label/command, and each command is one we know.
  const std::string list = gtp.execute("hexgui-analyze_commands");
  ASSERT_EQ(list.substr(0, 2), "= ");
  std::istringstream lines(list.substr(2, list.size() - 4));
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    const auto first = line.find('/'), second = line.find('/', first + 1);
    ASSERT_NE(second, std::string::npos) << line;
    const std::string command = line.substr(second + 1, line.find(' ', second) - second - 1);
    EXPECT_EQ(gtp.execute("known_command " + command), "= true\n\n") << line;
  }
  EXPECT_GE(count, 2);
}

TEST_F(Gtp, Analyze) {
  EXPECT_EQ(gtp.execute("rdmx-analyze"), "? this engine offers no analysis\n\n");
  std::vector<Player> sides;
  auto analyze = [&](const Hex& h, double) {
    sides.push_back(h.to_move());
    return std::vector<MoveStats>{{*h.parse_move("c3"), 100, 0.625}, {*h.parse_move("a1"), 10, 0.1}};
  };
  GtpSession s(FirstLegal{&asked}, "a", "1", 5, analyze);
  EXPECT_EQ(s.execute("rdmx-analyze w"), "= c3 62.5 a1 10.0\n\n");
  EXPECT_EQ(s.execute("rdmx-analyze"), "= c3 62.5 a1 10.0\n\n");
  EXPECT_EQ(sides, (std::vector<Player>{Hex::white, Hex::black}));
  EXPECT_EQ(s.position().moves_played(), 0);  // analysis plays nothing
  EXPECT_EQ(s.execute("rdmx-analyze x"), "? invalid color 'x'\n\n");
}

TEST_F(Gtp, TimeControl) {
  std::vector<MoveRequest> requests;
  GtpSession s(FirstLegal{&asked, &requests}, "t", "1", 5);
  s.execute("genmove b");
  EXPECT_EQ(requests.back().seconds, 0);  // no clock: the engine's own time
  EXPECT_EQ(s.execute("time_settings 60 0 0"), "= \n\n");
  s.execute("genmove w");
  EXPECT_GT(requests.back().seconds, 0.5);
  EXPECT_LT(requests.back().seconds, 6.0);  // 60 s for a game's moves, not for one
  EXPECT_EQ(s.execute("time_left w 1 0"), "= \n\n");
  s.execute("genmove w");
  EXPECT_LE(requests.back().seconds, 0.5);  // never the whole clock
  EXPECT_EQ(s.execute("time_left b 10 5"), "= \n\n");  // byo-yomi: 10 s for 5 stones
  s.execute("genmove b");
  EXPECT_GT(requests.back().seconds, 1.0);
  EXPECT_LE(requests.back().seconds, 2.0);
  EXPECT_EQ(s.execute("time_left b 30"), "= \n\n");  // colour and seconds only: main time
  const std::string left = s.execute("time_left b");
  EXPECT_EQ(left.substr(0, 4), "= 30") << left;
  for (const char* bad : {"time_settings 1 2", "time_settings -1 0 0", "time_settings x 0 0", "time_settings nan 0 0",
                          "time_settings 1 1 -1", "time_left", "time_left q 1 1", "time_left b 1 1 1",
                          "time_left b inf 0", "time_left b 1 x"})
    EXPECT_EQ(s.execute(bad).substr(0, 2), "? ") << bad;
  EXPECT_EQ(s.execute("time_settings 0 5 0"), "= \n\n");  // byo-yomi time without stones: no limit
  s.execute("genmove w");
  EXPECT_EQ(requests.back().seconds, 0);
}

TEST(GameClockTest, MainTimeThenByoYomi) {
  GameClock clock;
  EXPECT_FALSE(clock.limited());
  EXPECT_EQ(clock.budget(Hex::black, 121), 0);
  clock.settings(100, 10, 2);
  ASSERT_TRUE(clock.limited());
  const double first = clock.budget(Hex::black, 121);
  EXPECT_GT(first, 100.0 / 40 + 10.0 / 2 - 1);  // a share of main time and a byo-yomi stone's
  EXPECT_LT(first, 100.0 / 30 + 10.0 / 2);
  EXPECT_GT(clock.budget(Hex::black, 20), first);  // fewer moves to come: more each
  clock.used(Hex::black, 99.5);
  clock.used(Hex::black, 1.0);  // main time is spent: byo-yomi starts
  EXPECT_EQ(clock.remaining(Hex::black), "10.000 2");
  EXPECT_NEAR(clock.budget(Hex::black, 50), 0.95 * 5, 1e-9);
  clock.used(Hex::black, 4);
  EXPECT_EQ(clock.remaining(Hex::black), "6.000 1");
  clock.used(Hex::black, 4);  // the period's stones are played: a new period
  EXPECT_EQ(clock.remaining(Hex::black), "10.000 2");
  EXPECT_EQ(clock.remaining(Hex::white), "100.000 0");  // the other clock did not run
  clock.time_left(Hex::white, 0.02, 0);
  EXPECT_GE(clock.budget(Hex::white, 50), 0.01);  // something, however little
}

TEST(GameClockTest, AbsoluteTime) {
  GameClock clock;
  clock.settings(30, 0, 0);
  const double b = clock.budget(Hex::white, 121);
  EXPECT_NEAR(b, std::min(0.95 * 30 / 30.25, 30 / 30.25 - 0.05), 1e-9);
  clock.used(Hex::white, 29);
  EXPECT_LE(clock.budget(Hex::white, 100), 0.5);
  clock.settings(0, 0, 0);
  EXPECT_FALSE(clock.limited());
}

// Whatever a controller sends, the session answers and goes on: random
// bytes, binary, very long lines, odd numbers, commands out of order.
TEST_F(Gtp, MalformedInputNeverStopsTheSession) {
  Rng rng(99);
  const std::vector<std::string> words = {
      "play", "genmove", "boardsize", "undo", "time_left", "time_settings", "param_game", "final_score", "b", "w",
      "swap-pieces", "resign", "a1", "k11", "z99", "-1", "0", "99999999999999999999", "1e308", "nan", "allow_swap",
      "showboard", "clear_board", "known_command", "rdmx-analyze", "#", "\t", "\x7f", "\xff\xfe", "=", "?", "\r"};
  int responses = 0;
  for (int line = 0; line < 3000; ++line) {
    std::string text;
    if (line % 3 == 0) {
      const std::uint32_t length = rng.below(200);
      for (std::uint32_t i = 0; i < length; ++i) text += static_cast<char>(rng.below(256));
    } else {
      const std::uint32_t count = rng.below(6);
      for (std::uint32_t i = 0; i < count; ++i) text += words[rng.below(static_cast<std::uint32_t>(words.size()))] + ' ';
    }
    std::string response;
    ASSERT_NO_THROW(response = gtp.execute(text)) << text;
    if (response.empty()) continue;
    ++responses;
    ASSERT_TRUE(response[0] == '=' || response[0] == '?') << response;
    ASSERT_EQ(response.substr(response.size() - 2), "\n\n");
    ASSERT_EQ(response.find("\n\n"), response.size() - 2) << "one response, one blank line";
  }
  EXPECT_GT(responses, 1000);
  EXPECT_EQ(gtp.execute(std::string(1 << 20, 'x')), "? unknown command\n\n");
  EXPECT_EQ(gtp.execute("clear_board"), "= \n\n");
  EXPECT_EQ(gtp.execute(std::string("play b \0a1", 10)), "= \n\n");  // control characters are dropped
  EXPECT_EQ(gtp.position().stone(cell("a1")), Hex::black);
  EXPECT_FALSE(gtp.quit());
  EXPECT_EQ(gtp.execute("name"), "= rdmx-hex\n\n");
}

TEST_F(Gtp, Quit) {
  EXPECT_EQ(gtp.execute("quit"), "= \n\n");
  EXPECT_TRUE(gtp.quit());
}

TEST_F(Gtp, ConstructorRejectsBadSize) {
  EXPECT_THROW(GtpSession(FirstLegal{&asked}, "x", "y", 0), std::invalid_argument);
  EXPECT_THROW(GtpSession(FirstLegal{&asked}, "x", "y", 20), std::invalid_argument);
  EXPECT_EQ(GtpSession(FirstLegal{&asked}, "x", "y").position().size(), 11);
}

TEST_F(Gtp, RunsAScriptedSession) {
  std::istringstream in(
      "boardsize 3\n"
      "# set up\n"
      "\n"
      "1 play b b2\n"
      "2 genmove w\n"
      "play w c3\n"
      "3 showboard\n"
      "4 quit\n"
      "name\n");
  std::ostringstream out;
  gtp.run(in, out);
  EXPECT_TRUE(gtp.quit());
  Hex expected(3);
  expected.place(*expected.parse_move("b2"), Hex::black);
  expected.place(*expected.parse_move("a1"), Hex::white);
  expected.place(*expected.parse_move("c3"), Hex::white);
  EXPECT_EQ(out.str(), "= \n\n"
                       "=1 \n\n"
                       "=2 a1\n\n"
                       "= \n\n"
                       "=3 \n" +
                           expected.board_text() +
                           "\n"
                           "=4 \n\n");
}

}  // namespace
}  // namespace rdmx::mcts
