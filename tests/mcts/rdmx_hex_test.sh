#!/usr/bin/env bash
# Runs rdmx-hex as a 2-process job the way a user (or a Hex GUI) does, and
# checks what it prints.
#   rdmx_hex_test.sh gtp|selfplay RUN TLS RDMX_HEX
set -euo pipefail
what="$1" run="$2" tls="$3" hex="$4"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
fail() { echo "FAILED: $*"; echo "--- output:"; cat "$out"; exit 1; }

case "$what" in
  gtp)
    # A GUI's conversation: ids, set-up moves, errors, a generated move.
    printf '%s\n' "1 name" "2 boardsize 7" "3 play b d4" "4 play w d4" "5 genmove w" "6 showboard" \
      "7 frobnicate" "8 quit" |
      "$run" --tls "$tls" -np 2 "$hex" --rdmx-threads=2 --mode gtp --rollouts 2000 --quiet >"$out" 2>&1 ||
      fail "rdmx-hex exited with $?"
    grep -qx '=1 rdmx-hex' "$out" || fail "no name"
    grep -qE '^=2 ?$' "$out" || fail "boardsize not accepted"
    grep -q '^?4 ' "$out" || fail "an occupied cell was accepted"
    grep -qE '^=5 [a-g][1-7]$' "$out" || fail "genmove gave no move"
    [ "$(grep -c 'X' "$out")" -ge 1 ] || fail "showboard does not show black's stone"
    grep -q '^?7 unknown command' "$out" || fail "unknown command not reported"
    grep -qE '^=8 ?$' "$out" || fail "quit not answered"
    ;;
  selfplay)
    "$run" --tls "$tls" -np 2 "$hex" --rdmx-threads=2 --mode selfplay --size 5 --rollouts 1500 --quiet >"$out" 2>&1 ||
      fail "rdmx-hex exited with $?"
    grep -qE '^(black|white) wins after [0-9]+ moves$' "$out" || fail "the game did not finish"
    [ "$(grep -c ' plays ' "$out")" -ge 5 ] || fail "fewer than 5 moves were played"
    ;;
  *) echo "usage: $0 gtp|selfplay RUN TLS RDMX_HEX" >&2; exit 2 ;;
esac
echo "rdmx-hex $what over $tls: ok"
