#!/usr/bin/env bash
# Instructions per sentence of the tracked word count, counted by callgrind: repeatable
# on a busy machine, unlike wall-clock figures. Startup cancels out:
#   (Ir(15,000 sentences) - Ir(5,000 sentences)) / 10,000
# Usage: bash bench/instructions.sh [--plain]   (about a minute; needs valgrind)
#   --plain: the count bolt is a plain Bolt that acks each input (Bolt's execute path)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-$here/../.venv/bin/python}"
ir() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$python" "$here/worker_direct.py" "$1" "${@:2}" 2>&1 \
    | awk '/Collected/ {gsub(",", "", $4); print $4}'
}
a=$(ir 5000 "$@")
b=$(ir 15000 "$@")
echo "instructions per sentence: $(( (b - a) / 10000 ))"
