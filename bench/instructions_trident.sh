#!/usr/bin/env bash
# Instructions per sentence of the Trident word count (bench/trident.py --direct) beside
# the core word count (bench/worker_direct.py), counted by callgrind: repeatable on a busy
# machine, unlike wall-clock figures. Startup cancels out:
#   (Ir(15,000 sentences) - Ir(5,000 sentences)) / 10,000
# Usage: PYTHON=... bash bench/instructions_trident.sh [batch size]  (a few minutes)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-$here/../.venv/bin/python}"
batch="${1:-2000}"
ir() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$python" "$@" 2>&1 \
    | awk '/Collected/ {gsub(",", "", $4); print $4}'
}
a=$(ir "$here/trident.py" --direct --runs 1 --total 5000 --batch "$batch")
b=$(ir "$here/trident.py" --direct --runs 1 --total 15000 --batch "$batch")
echo "trident: instructions per sentence: $(( (b - a) / 10000 ))"
a=$(ir "$here/worker_direct.py" 5000)
b=$(ir "$here/worker_direct.py" 15000)
echo "core:    instructions per sentence: $(( (b - a) / 10000 ))"
