#!/usr/bin/env bash
# Instructions per item that crosses workers (bench/crossing.py: take, encode, sign,
# send, receive, check, decode, deliver, free; the word count's mix of items), counted
# by callgrind: repeatable on a busy machine. Startup cancels out:
#   (Ir(1,000 frames) - Ir(200 frames)) / (800 frames * items a frame: 224 for the mix)
# Usage: bash bench/instructions_crossing.sh [batch|-] [words|sentences|acks|one]
#   (about a minute; needs valgrind)
# With "batch": the items cross as BatchBolts' do (bench/crossing.py says how); "-" for
# the Tuple path. With a kind, frames carry only that part of the mix (160 words, 16
# sentences, 48 acker messages, or one acker message) and the script also prints the
# instructions per frame: a frame of one item is what a frame costs by itself.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-$here/../.venv/bin/python}"
mode="${1:-}"
[ "$mode" = "-" ] && mode=""
kind="${2:-}"
# Each run's output: crossing.py's line, which says how many items a frame carries, and
# valgrind's count. A run that fails stops the script with what it printed.
run() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$python" "$here/crossing.py" "$1" ${mode} ${kind} 2>&1
}
out_a=$(run 200) || { echo "$out_a" >&2; exit 1; }
out_b=$(run 1000) || { echo "$out_b" >&2; exit 1; }
ir() { sed -n 's/^==[0-9]*== Collected : \(.*\)/\1/p' | tr -d , ; }
a=$(ir <<< "$out_a")
b=$(ir <<< "$out_b")
items=$(sed -n 's/.*(\([0-9]*\) items per frame).*/\1/p' <<< "$out_b")
label="${mode}${kind:+${mode:+, }only $kind}"
[ -n "$kind" ] && echo "instructions per frame${label:+ ($label)}: $(( (b - a) / 800 ))"
echo "instructions per crossing item${label:+ ($label)}: $(( (b - a) / (800 * items) ))"
