#!/usr/bin/env bash
# generated_section.sh [--update] DOC NAME -- COMMAND...
# Docs that list what the code defines (settings, examples) carry that list
# between the lines "<!-- begin generated: NAME -->" and
# "<!-- end generated: NAME -->". This compares the section with what
# COMMAND prints now and fails, showing the difference, when they drifted;
# with --update it rewrites the section instead.
set -euo pipefail
update=0
if [ "${1:-}" = --update ]; then update=1; shift; fi
[ $# -ge 4 ] && [ "$3" = -- ] || { echo "usage: $0 [--update] DOC NAME -- COMMAND..." >&2; exit 2; }
doc="$1" name="$2"; shift 3
begin="<!-- begin generated: $name -->" end="<!-- end generated: $name -->"
grep -qxF "$begin" "$doc" && grep -qxF "$end" "$doc" || { echo "$doc has no section '$name' ($begin ... $end)" >&2; exit 1; }
now="$(mktemp)" section="$(mktemp)"
trap 'rm -f "$now" "$section"' EXIT
"$@" >"$now" </dev/null || { echo "'$*' failed" >&2; exit 1; }
[ -s "$now" ] || { echo "'$*' printed nothing" >&2; exit 1; }
awk -v b="$begin" -v e="$end" '$0 == e { inside = 0 } inside { print } $0 == b { inside = 1 }' "$doc" >"$section"
if [ "$update" = 1 ]; then
  awk -v b="$begin" -v e="$end" -v file="$now" '
    $0 == b { print; while ((getline line < file) > 0) print line; skipping = 1; next }
    $0 == e { skipping = 0 }
    !skipping { print }' "$doc" >"$doc.new"
  mv "$doc.new" "$doc"
  echo "$doc: section '$name' updated"
  exit 0
fi
if ! diff -u --label "$doc ($name)" --label "what the code says now" "$section" "$now"; then
  echo "$doc's section '$name' no longer matches the code: run" >&2
  echo "  $0 --update $doc $name -- $*" >&2
  exit 1
fi
echo "$doc: section '$name' matches the code"
