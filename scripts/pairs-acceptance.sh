#!/bin/bash
# Issue 46's acceptance on the simulator: 4 pairs of slots whose slot effects differ (the odd
# GPU of each pair 2%, 4%, 6% and 3% faster: serve-sim's --slowdown chosen by {gpus}), an
# unchanged head and a head 10% slower, each `throughline bench` in blocks on the 4 pairs at
# once with the gate's sequential looks, then `gate` on its results; one line per job.
#
#   scripts/pairs-acceptance.sh [WORK_DIR] [JOBS_EACH]
#
# TL names the throughline binary [default: target/debug/throughline]. The GPUs are only
# names here (simulators): the run takes no GPU lock unless {gpus} appears, which it does, so
# give it a THROUGHLINE_LOCK_DIR of its own on a shared machine.
set -u
TL=${TL:-$(pwd)/target/debug/throughline}
WORK=${1:-pairs-acceptance}
N=${2:-2}
mkdir -p "$WORK" && cd "$WORK" || exit 2
cat > p.toml <<'P'
name = "pairs"
[target]
endpoints = ["http://127.0.0.1:1"]
model = "sim-model"
[workload]
input_tokens = 64
max_tokens = 32
ignore_eos = true
[sweep]
concurrency = [1, 8]
trials = 3
requests_per_level = 16
warmup_requests = 2
[gate]
min_trials = 3
P
slot='$(case {gpus} in 1) echo 0.98;; 3) echo 0.96;; 5) echo 0.94;; 7) echo 0.97;; *) echo 1;; esac)'
base="exec $TL serve-sim --port {port} --preset fast --token-delay-ms 15 --slowdown $slot"
slow="exec $TL serve-sim --port {port} --preset fast --token-delay-ms 15 --slowdown \$(awk \"BEGIN{{print $slot * 1.111}}\")"
for kind in unchanged slowed; do
  for i in $(seq 1 "$N"); do
    head=$base
    [ "$kind" = slowed ] && head=$slow
    s=$(date +%s)
    "$TL" bench -p p.toml --server-command "$head" --base-server-command "$base" \
      --slots "0;1" --slots "2;3" --slots "4;5" --slots "6;7" --no-progress \
      -o "out-$kind-$i" > "log-$kind-$i" 2>&1
    rc=$?
    "$TL" gate -r "out-$kind-$i/results.json" > "gate-$kind-$i" 2>&1
    g=$?
    verdict=$(grep -E '^(PASS|REGRESSION|INCONCLUSIVE|NOT COMPARABLE)' "gate-$kind-$i" | head -1 | cut -c1-150)
    echo "$kind $i: bench exit $rc, gate exit $g, $(( $(date +%s) - s )) s; $verdict"
  done
done
