#!/usr/bin/env bash
# Instructions per item that crosses workers (bench/crossing.py: take, encode, sign,
# send, receive, check, decode, deliver, free; the word count's mix of items), counted
# by callgrind: repeatable on a busy machine. Startup cancels out:
#   (Ir(1,000 frames) - Ir(200 frames)) / (800 frames * 224 items)
# Usage: bash bench/instructions_crossing.sh [batch]   (about a minute; needs valgrind)
# With "batch": the items cross as BatchBolts' do (bench/crossing.py says how).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-$here/../.venv/bin/python}"
mode="${1:-}"
ir() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$python" "$here/crossing.py" "$1" ${mode} 2>&1 \
    | sed -n 's/^==[0-9]*== Collected : \(.*\)/\1/p' | tr -d ,
}
a=$(ir 200)
b=$(ir 1000)
echo "instructions per crossing item${mode:+ ($mode)}: $(( (b - a) / (800 * 224) ))"
