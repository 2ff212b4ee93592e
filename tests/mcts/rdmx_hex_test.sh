#!/usr/bin/env bash
# Runs rdmx-hex as a 2-process job the way a user (or a Hex GUI) does, and
# checks what it prints.
#   rdmx_hex_test.sh gtp|idle|selfplay RUN TLS RDMX_HEX
#   rdmx_hex_test.sh match RUN TLS RDMX_HEX RDMX_BENCH_MCTS_MATCH
set -euo pipefail
what="$1" run="$2" tls="$3" hex="$4" match="${5:-}"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
fail() { echo "FAILED: $*"; echo "--- output:"; cat "$out"; exit 1; }

case "$what" in
  gtp)
    # A GUI's or referee's conversation: ids, set-up moves, errors, garbage,
    # generated moves under a clock, resignation, the swap rule.
    {
      printf '%s\n' "1 name" "2 boardsize 7" "3 play b d4" "4 play w d4" "5 genmove w" "6 showboard" \
        "7 frobnicate"
      printf 'play \001\377\376 b\tzz9 %%%%%% \n'
      head -c 3000 /dev/zero | tr '\0' 'q'; printf '\n'
      printf '%s\n' "8 time_settings 30 0 0" "9 genmove b" "10 final_score" "11 play w resign" \
        "12 final_score" "13 param_game allow_swap 1" "14 clear_board" "15 play b a1" "16 genmove w" \
        "17 time_left w 5 0" "18 genmove b" "19 undo" "20 quit"
    } | "$run" --tls "$tls" -np 2 "$hex" --rdmx-threads=2 --mode gtp --rollouts 2000 --quiet >"$out" 2>&1 ||
      fail "rdmx-hex exited with $?"
    grep -qx '=1 rdmx-hex' "$out" || fail "no name"
    grep -qE '^=2 ?$' "$out" || fail "boardsize not accepted"
    grep -q '^?4 ' "$out" || fail "an occupied cell was accepted"
    grep -qE '^=5 [a-g][1-7]$' "$out" || fail "genmove gave no move"
    [ "$(grep -c 'X' "$out")" -ge 1 ] || fail "showboard does not show black's stone"
    grep -q '^?7 unknown command' "$out" || fail "unknown command not reported"
    [ "$(grep -c '^? ' "$out")" -ge 2 ] || fail "garbage lines not answered with failures"
    grep -qE '^=9 [a-g][1-7]$' "$out" || fail "genmove under a clock gave no move"
    grep -q '^?10 the game is not over' "$out" || fail "final_score of a game going on"
    grep -qE '^=11 ?$' "$out" || fail "play w resign not accepted"
    grep -qx '=12 B+' "$out" || fail "final_score after white resigned"
    grep -qE '^=16 ([a-g][1-7]|swap-pieces)$' "$out" || fail "genmove with the swap rule gave no move"
    grep -qE '^=18 [a-g][1-7]$' "$out" || fail "genmove after time_left gave no move"
    grep -qE '^=19 ?$' "$out" || fail "undo refused"
    grep -qE '^=20 ?$' "$out" || fail "quit not answered"
    ;;
  idle)
    # An engine waiting for its opponent's move costs (almost) no CPU: the
    # job's threads sleep on their network workers (RDMX_PROGRESS=block, the
    # engine's default). Measured over 3 s of the 2 x 2 job's CPU time.
    fifo="$(mktemp -u)"
    mkfifo "$fifo"
    trap 'rm -f "$out" "$fifo"' EXIT
    "$run" --tls "$tls" -np 2 "$hex" --rdmx-threads=2 --mode gtp --rollouts 500 --quiet <"$fifo" >"$out" 2>&1 &
    job=$!
    exec 3>"$fifo"
    printf '1 boardsize 5\n2 genmove b\n' >&3
    for _ in $(seq 100); do grep -qE '^=2 ' "$out" && break; sleep 0.2; done
    grep -qE '^=2 [a-e][1-5]$' "$out" || { exec 3>&-; wait "$job" || true; fail "the engine did not answer"; }
    descendants() { local c; for c in $(awk -v p="$1" '$4 == p { print $1 }' /proc/[0-9]*/stat 2>/dev/null); do echo "$c"; descendants "$c"; done; }
    pids="$(descendants "$job")"
    ticks() { local t=0 p; for p in $pids; do [ -r "/proc/$p/stat" ] && t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done; echo "$t"; }
    before=$(ticks); sleep 3; after=$(ticks)
    hz=$(getconf CLK_TCK)
    printf '3 quit\n' >&3
    exec 3>&-
    wait "$job" || fail "rdmx-hex exited with $?"
    used=$(( (after - before) * 100 / (3 * hz) ))  # percent of one core
    echo "idle engine (2 processes x 2 threads): ${used} % of a core"
    [ "$used" -lt 20 ] || fail "an idle engine used ${used} % of a core"
    ;;
  match)
    # The benchmark's match on tiny configurations: one pairing across a
    # 2-process engine, one under GTP's clock; every game counted, no error.
    for clock in "" --clock; do
      "$match" --games 2 --size 4 --seconds 0.05 --tls "$tls" --run "$run" --hex "$hex" $clock \
        "1x1" "2x1 --knowledge none" >"$out" 2>"$out.progress" ||
        { cat "$out.progress" >>"$out"; fail "the match exited with $?"; }
      cat "$out.progress" >>"$out"
      grep -q '^{"bench":"mcts","variant":"match","a":"1x1","b":"2x1 --knowledge none"' "$out" || fail "no result line"
      grep -q '"games":2,"a_wins":[0-2],"b_wins":[0-2],' "$out" || fail "games not counted"
      grep -q '"errors":0,' "$out" || fail "errors in the match"
      grep -q '"ci95_low":[0-9.e-]*,"ci95_high":[0-9.e-]*,' "$out" || fail "no interval"
      [ "$(grep -c '^match 1x1 vs 2x1 --knowledge none: [12]/2 games' "$out")" = 2 ] || fail "no progress lines"
    done
    # Another GTP program, as users play MoHex: here rdmx-hex started by hand,
    # with a setup command.
    "$match" --games 2 --size 4 --seconds 0.05 --tls "$tls" --run "$run" --hex "$hex" \
      "cmd:$run --tls $tls -np 1 $hex --mode gtp --quiet --seconds 0.05|param_game allow_swap 0" "1x1" \
      >"$out" 2>"$out.progress" || { cat "$out.progress" >>"$out"; fail "the match with a command exited with $?"; }
    grep -q '"a":"cmd:.*"games":2,.*"errors":0,' "$out" || fail "the match with a command"
    rm -f "$out.progress"
    ;;
  selfplay)
    "$run" --tls "$tls" -np 2 "$hex" --rdmx-threads=2 --mode selfplay --size 5 --rollouts 1500 --quiet >"$out" 2>&1 ||
      fail "rdmx-hex exited with $?"
    grep -qE '^(black|white) wins after [0-9]+ moves$' "$out" || fail "the game did not finish"
    [ "$(grep -c ' plays ' "$out")" -ge 5 ] || fail "fewer than 5 moves were played"
    ;;
  *) echo "usage: $0 gtp|idle|selfplay|match RUN TLS RDMX_HEX [MATCH]" >&2; exit 2 ;;
esac
echo "rdmx-hex $what over $tls: ok"
