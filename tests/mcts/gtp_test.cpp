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

// A fake engine: plays the first empty cell and records who it played for.
struct FirstLegal {
  std::vector<Player>* asked;
  std::optional<Hex::Move> operator()(const Hex& position) const {
    asked->push_back(position.to_move());
    std::array<Hex::Move, Hex::max_moves> moves;
    if (position.legal_moves(moves) == 0) return std::nullopt;
    return moves[0];
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
  const std::vector<std::string> required = {"protocol_version", "name",      "version", "known_command",
                                             "list_commands",    "quit",      "boardsize", "clear_board",
                                             "play",             "genmove",   "undo",    "showboard",
                                             "hexgui-analyze_commands"};
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
  GtpSession resigning([](const Hex&) { return std::optional<Hex::Move>(); }, "r", "1");
  EXPECT_EQ(resigning.execute("genmove b"), "= resign\n\n");
  EXPECT_EQ(resigning.position().moves_played(), 0);
}

TEST_F(Gtp, GenmoveRejectsAnIllegalChoice) {
  GtpSession stubborn([](const Hex&) { return std::optional<Hex::Move>(0); }, "s", "1", 3);
  EXPECT_EQ(stubborn.execute("play b a1"), "= \n\n");
  const std::uint64_t hash = stubborn.position().hash();
  EXPECT_EQ(stubborn.execute("genmove b"), "? the engine chose an illegal move\n\n");
  EXPECT_EQ(stubborn.position().hash(), hash);
  GtpSession off_board([](const Hex&) { return std::optional<Hex::Move>(9); }, "o", "1", 3);
  EXPECT_EQ(off_board.execute("genmove w"), "? the engine chose an illegal move\n\n");
  EXPECT_EQ(off_board.position().moves_played(), 0);
}

TEST_F(Gtp, GameOver) {
  gtp.execute("boardsize 2");
  EXPECT_EQ(gtp.execute("play b a1"), "= \n\n");
  EXPECT_EQ(gtp.execute("play b a2"), "= \n\n");  // a1-a2 joins top and bottom
  ASSERT_TRUE(gtp.position().terminal());
  EXPECT_EQ(gtp.position().winner(), Hex::black);
  EXPECT_EQ(gtp.execute("play w b1"), "? game is over\n\n");
  EXPECT_EQ(gtp.execute("genmove w"), "= resign\n\n");
  EXPECT_TRUE(asked.empty());
  EXPECT_EQ(gtp.execute("undo"), "= \n\n");
  EXPECT_FALSE(gtp.position().terminal());
  EXPECT_EQ(gtp.execute("play w b1"), "= \n\n");
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

TEST_F(Gtp, HexGuiAnalyzeCommands) { EXPECT_EQ(gtp.execute("hexgui-analyze_commands"), "= \n\n"); }

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
