#!/usr/bin/env bash
# Instructions per sentence of bench/two_workers.py (the Spark benchmark's 2-worker word
# count without Spark), summed over both worker processes, counted by callgrind.
# Startup and the parent cancel out: (Ir(60,000 sentences) - Ir(20,000)) / 40,000.
# Less repeatable than bench/instructions.sh (frame sizes depend on timing): ~1-2%.
# Usage: bash bench/instructions_two.sh   (about three minutes; needs valgrind)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-$here/../.venv/bin/python}"
ir() {
  valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=/dev/null \
    "$python" "$here/two_workers.py" "$1" 2>&1 \
    | awk '/Collected/ {gsub(",", "", $4); s += $4} END {print s}'
}
a=$(ir 20000)
b=$(ir 60000)
echo "instructions per sentence (both workers): $(( (b - a) / 40000 ))"
