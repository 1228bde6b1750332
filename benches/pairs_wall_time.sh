#!/usr/bin/env bash
# Wall time of a run in blocks on one pair of slots against the same blocks on several pairs
# at once (`--slots` once per pair), side by side (one pair, N pairs, one pair, ...), REPEATS
# times each, against this binary's `serve-sim` (a process per server, a fixed time per
# token, so the blocks' own time is the server's, as on a GPU); prints every run, then the
# medians and the ratio (issue 46: 4 blocks on 4 pairs at most 0.35 x the time on one pair).
# Usage: benches/pairs_wall_time.sh BIN [PAIRS] [REPEATS] [TOKEN_DELAY_MS]
#   defaults: 4 pairs, 3 repeats, 10 ms a token. The blocks are --blocks PAIRS, no more.
set -euo pipefail
bin=$1 pairs=${2:-4} repeats=${3:-3} delay=${4:-10}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/p.toml" <<TOML
name = "pairs"
[target]
endpoints = ["http://127.0.0.1:1"]
[workload]
input_tokens = 16
max_tokens = 16
ignore_eos = true
[sweep]
concurrency = [1, 4]
requests_per_level = 8
warmup_requests = 1
trials = 3
TOML
server="exec $bin serve-sim --port {port} --preset fixed --token-delay-ms $delay"
one=(--slots "0;1")
many=()
for p in $(seq 0 $((pairs - 1))); do many+=(--slots "$((2 * p));$((2 * p + 1))"); done
printf '%-8s %4s %8s\n' pairs run wall_s
: >"$work/rows"
for run in $(seq "$repeats"); do
  for n in 1 "$pairs"; do
    if [ "$n" = 1 ]; then slots=("${one[@]}"); else slots=("${many[@]}"); fi
    rm -rf "$work/out"
    start=$(date +%s.%N)
    THROUGHLINE_LOCK_DIR="$work/locks" "$bin" bench --profile "$work/p.toml" --out "$work/out" \
      --no-progress --no-plots --server-command "$server" --base-server-command "$server" \
      "${slots[@]}" --blocks "$pairs" --max-blocks "$pairs" >"$work/log" 2>&1 \
      || { cat "$work/log" >&2; exit 1; }
    end=$(date +%s.%N)
    wall=$(python3 -c "print(round($end - $start, 2))")
    printf '%-8s %4s %8s\n' "$n" "$run" "$wall"
    echo "$n $wall" >>"$work/rows"
  done
done
python3 - "$work/rows" "$pairs" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = lambda n: statistics.median(float(w) for p, w in rows if p == n)
one, many = med("1"), med(sys.argv[2])
print(f"median wall: 1 pair {one:.2f} s, {sys.argv[2]} pairs {many:.2f} s; ratio {many / one:.3f}")
PY
