#!/usr/bin/env bash
# Instructions per item of bench/transport.py (encode, sign, send, receive, check,
# decode; Tuple creation included, as an emit does), counted by callgrind: repeatable on
# a busy machine, unlike the wall-clock figures transport.py prints. Startup cancels out:
#   (Ir(1,000 frames) - Ir(200 frames)) / (800 frames * 220 items)
# Usage: bash bench/instructions_transport.sh   (about a minute; needs valgrind)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-$here/../.venv/bin/python}"
ir() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$python" "$here/transport.py" "$1" 2>&1 \
    | sed -n 's/^==[0-9]*== Collected : \(.*\)/\1/p' | tr -d ,
}
a=$(ir 200)
b=$(ir 1000)
echo "transport instructions per item: $(( (b - a) / (800 * 220) ))"
