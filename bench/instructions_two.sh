#!/usr/bin/env bash
# Instructions per sentence of bench/two_workers.py (the Spark benchmark's word count
# without Spark), counted by callgrind, per worker process, for 1 and for 2 workers.
# Startup and the parent cancel out: (Ir(60,000 sentences) - Ir(20,000)) / 40,000.
# Less repeatable than bench/instructions.sh (frame sizes depend on timing): the same code
# measured 58,069 + 65,884 in one session and 63,017 + 69,989 in the next.
#
# The busiest worker bounds the rate: two workers can run at most
# (one worker's count) / (the busiest worker's count) times as fast as one, less
# whatever two busy cores cost each other on this machine (bench/scaling.py).
# Usage: bash bench/instructions_two.sh [corpus] [batch] [p2]   (about five minutes; needs valgrind)
#   e.g. bash bench/instructions_two.sh zipf "batch t100" p2
#   corpus: benchmark (default; its count words split 63/37) or zipf (balanced, 50/50)
#   batch: the split and count are BatchBolts (topology/batch.py); "-" for the Tuple path;
#     with " tN" (quoted with it), N sentences a tree (emit_batch; bench/two_workers.py)
#   p2: also one worker running the two-worker topology (parallelism 2, two ackers, all
#       local): what parallelism 2 costs apart from crossing workers (two more minutes)
set -euo pipefail
# One string hash seed for every run: with a random one, the same code measured ~1k a
# sentence apart from run to run (dict probes over the 10,000 words; callgrind diffs).
export PYTHONHASHSEED="${PYTHONHASHSEED:-0}"
# Under valgrind trees take ~50x longer: no tree may time out (bench/two_workers.py).
export MESSAGE_TIMEOUT_SECS="${MESSAGE_TIMEOUT_SECS:-3600}"
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-$here/../.venv/bin/python}"
corpus="${1:-benchmark}"
mode="${2:-}"
[ "$mode" = "-" ] && mode=""
also_p2="${3:-}"
# Ir of each worker process, in worker order: two_workers.py prints each worker's pid
# (pids can wrap around within a run, so their order cannot tell the workers apart).
# A run that fails, or a worker without a count, stops the script with the run's output
# (it ran in a process substitution, where an error would otherwise only leave a count
# missing and a bare "unbound variable" further down).
ir() {
  local dir out counts
  # valgrind's own lines go to a log per process, so that none can cut into the
  # workers' pid lines on the shared stderr. (The count lost now and then was two
  # workers' pid lines run together; two_workers.py now writes each in one write.)
  dir=$(mktemp -d)
  if ! out=$(valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=/dev/null \
    --log-file="$dir/vg.%p" "$python" "$here/two_workers.py" "$1" "$2" "$corpus" ${mode} ${3:-} 2>&1); then
    printf 'bench/instructions_two.sh: two_workers.py %s %s %s failed:\n%s\n' \
      "$1" "$2" "$corpus" "$(echo "$out" | tail -20)" >&2
    rm -rf "$dir"
    kill -TERM $$
    return 1
  fi
  counts=$(for pid in $(echo "$out" | sed -n 's/.*two_workers: worker \([0-9]*\) pid \([0-9]*\).*/\1 \2/p' \
      | sort -n | awk '{print $2}'); do
    sed -n 's/^==[0-9]*== Collected : \(.*\)/\1/p' "$dir/vg.$pid" 2>/dev/null | tr -d ,
  done)
  rm -rf "$dir"
  if [ "$(echo "$counts" | grep -c .)" != "$2" ]; then
    printf 'bench/instructions_two.sh: %s worker count(s) for %s workers in:\n%s\n' \
      "$(echo "$counts" | grep -c .)" "$2" "$(echo "$out" | tail -20)" >&2
    kill -TERM $$
    return 1
  fi
  echo "$counts"
}
per_worker() {  # $1 workers [$2 pN] -> marginal instructions per sentence of each worker
  local a b
  mapfile -t a < <(ir 20000 "$1" ${2:-})
  mapfile -t b < <(ir 60000 "$1" ${2:-})
  for i in "${!a[@]}"; do echo $(( (b[i] - a[i]) / 40000 )); done
}
mapfile -t one < <(per_worker 1)
mapfile -t two < <(per_worker 2)
busiest=$(( two[0] > two[1] ? two[0] : two[1] ))
echo "corpus: $corpus"
echo "instructions per sentence, 1 worker: ${one[0]}"
echo "instructions per sentence, 2 workers: ${two[0]} + ${two[1]} = $(( two[0] + two[1] ))"
if [ "$also_p2" = "p2" ]; then
  mapfile -t p2 < <(per_worker 1 p2)
  echo "instructions per sentence, 1 worker at parallelism 2: ${p2[0]}" \
    "(parallelism 2 costs $(( p2[0] - one[0] )); crossing workers $(( two[0] + two[1] - p2[0] )))"
  # Per item that crosses, over the items bench/scaling.py's model counts at 2 workers
  # (uniform placement, 10 words a sentence): half the sentences, half their words, and
  # the acker messages of a tree (the split's, the other worker's count's: 1.5) shared
  # by the N sentences of a tree ("tN"). A model's count, not one the run made.
  rows=$(sed -n 's/.*\bt\([0-9][0-9]*\)\b.*/\1/p' <<< "$mode")
  awk -v x="$(( two[0] + two[1] - p2[0] ))" -v n="${rows:-1}" \
    'BEGIN {items = 0.5 + 5 + 1.5 / n; printf "crossing per item: %.0f (%.2f items a sentence, modelled)\n", x / items, items}'
fi
awk -v one="${one[0]}" -v b="$busiest" \
  'BEGIN {printf "busiest / one worker: %.0f%%; bound on 2 workers / 1 worker: %.2fx\n", 100 * b / one, one / b}'
