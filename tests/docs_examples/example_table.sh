#!/bin/sh
# example_table.sh GUIDE EXAMPLES
#
# Checks that GUIDE's table of examples (docs/guide.md) matches the numbered
# examples in EXAMPLES (apps/examples): a row per NN_name.cpp, each naming
# the executable the build makes of it, rdmx-example-NN-name
# (apps/examples/CMakeLists.txt), and no row for a file that does not exist.
# A row is a table line that starts with | `NN_name.cpp` | `target` |.
# Prints every difference and exits 1 if there is one.
set -u
if [ $# -ne 2 ]; then
  echo "usage: example_table.sh GUIDE EXAMPLES" >&2
  exit 2
fi
guide=$1
examples=$2
name=$(basename "$guide")
if [ ! -r "$guide" ] || [ ! -d "$examples" ]; then
  echo "example_table: cannot read $guide or $examples" >&2
  exit 2
fi

rows=$(sed -n 's/^| `\([0-9][0-9]_[A-Za-z0-9_]*\.cpp\)` | `\([^`]*\)` |.*$/\1 \2/p' "$guide")
if [ -z "$rows" ]; then
  echo "$name: no table of examples (rows like | \`01_hello.cpp\` | \`rdmx-example-01-hello\` | ...)"
  exit 1
fi

errors=0
while read -r file target; do
  if [ ! -f "$examples/$file" ]; then
    echo "$name: a row names $file, which is not in $examples"
    errors=$((errors + 1))
  fi
  expected=rdmx-example-$(printf '%s' "${file%.cpp}" | tr _ -)
  if [ "$target" != "$expected" ]; then
    echo "$name: the row of $file names $target; the build makes $expected"
    errors=$((errors + 1))
  fi
done <<ROWS
$rows
ROWS

for path in "$examples"/[0-9][0-9]_*.cpp; do
  [ -e "$path" ] || continue
  file=$(basename "$path")
  count=$(printf '%s\n' "$rows" | awk -v f="$file" '$1 == f' | wc -l)
  if [ "$count" -eq 0 ]; then
    echo "$name: $file has no row in the table of examples"
    errors=$((errors + 1))
  elif [ "$count" -gt 1 ]; then
    echo "$name: $file has $count rows in the table of examples"
    errors=$((errors + 1))
  fi
done

if [ "$errors" -gt 0 ]; then
  echo "$name: $errors problem(s) in the table of examples"
  exit 1
fi
echo "$name: the table of examples names every example of $examples"
