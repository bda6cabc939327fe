#!/usr/bin/env bash
# Instructions per input tuple of a windowed bolt's topology beside a plain bolt's,
# counted by callgrind (repeatable on a busy machine, unlike wall-clock figures).
# Startup cancels out: (Ir(30,000 tuples) - Ir(10,000 tuples)) / 20,000.
# Usage: bash bench/instructions_windowing.sh [NAME...]   (NAME: plain, sliding,
# tumbling, event; default plain and sliding; a few minutes; needs valgrind).
# Set PYTHON (default .venv/bin/python) and, without tupletree installed, PYTHONPATH=src.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-$here/../.venv/bin/python}"
ir() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$python" "$here/windowing.py" "$1" --only "$2" 2>&1 \
    | awk '/Collected/ {gsub(",", "", $4); print $4}'
}
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(plain sliding)
for name in "${names[@]}"; do
  a=$(ir 10000 "$name")
  b=$(ir 30000 "$name")
  echo "$name: instructions per tuple: $(( (b - a) / 20000 ))"
done
