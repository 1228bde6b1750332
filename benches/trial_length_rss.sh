#!/usr/bin/env bash
# Peak RSS of `throughline bench` for a short and a long closed-loop duration trial, run side
# by side (short, long, short, long, ...) against one `serve-sim`, REPEATS times each; prints
# every run and then the medians and the long/short ratio. A trial that held its requests'
# records grows with its length (about 500 bytes a request); a streaming one stays flat.
# Usage: benches/trial_length_rss.sh BIN [SHORT] [LONG] [REPEATS] [STREAMS] [TOKENS] [PRESET] [ENGINE]
#   defaults: 10s 40s 3 64 8 instant openai (openai: no telemetry; auto: the simulator's
#   counters are scraped and cross-checked, which keeps a slim copy of each request).
# Peak RSS is GNU time's "Maximum resident set size" (KiB).
set -euo pipefail
bin=$1 short=${2:-10s} long=${3:-40s} repeats=${4:-3} streams=${5:-64} tokens=${6:-8}
preset=${7:-instant} engine=${8:-openai}
work=$(mktemp -d)
sim_pid=
trap '[ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null; rm -rf "$work"' EXIT
"$bin" serve-sim --port 0 --preset "$preset" >"$work/sim.out" 2>/dev/null &
sim_pid=$!
for _ in $(seq 100); do grep -qs " on " "$work/sim.out" && break; sleep 0.1; done
url=$(grep -m1 " on " "$work/sim.out" | sed 's/.* on //')
[ -n "$url" ] || { echo "serve-sim did not start" >&2; exit 2; }

printf '%-6s %6s %10s %12s %14s\n' trial run requests requests_s peak_rss_kib
: >"$work/rows"
for run in $(seq "$repeats"); do
  for length in "$short" "$long"; do
    cat >"$work/p.toml" <<TOML
name = "rss"
[target]
endpoints = ["$url"]
engine = "$engine"
[workload]
input_tokens = 16
max_tokens = $tokens
ignore_eos = true
degenerate_below = 1
[sweep]
concurrency = [$streams]
duration = "$length"
trials = 1
warmup_requests = 0
request_timeout = "30m"
TOML
    rm -rf "$work/out"
    /usr/bin/time -v -o "$work/time" "$bin" bench --profile "$work/p.toml" --out "$work/out" \
      --no-progress >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time")
    read -r requests rate < <(python3 -c "
import json
t = json.load(open('$work/out/results.json'))['levels'][0]['trials'][0]
print(t['requests_sent'], round(t['requests_per_s']))")
    lines=$(wc -l <"$work/out/requests.jsonl")
    [ "$lines" -eq "$requests" ] || { echo "requests.jsonl has $lines lines for $requests requests" >&2; exit 1; }
    printf '%-6s %6s %10s %12s %14s\n' "$length" "$run" "$requests" "$rate" "$rss"
    echo "$length $rss $rate" >>"$work/rows"
  done
done
python3 - "$work/rows" "$short" "$long" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
def med(length, col):
    return statistics.median(float(r[col]) for r in rows if r[0] == length)
short, long = sys.argv[2], sys.argv[3]
s, l = med(short, 1), med(long, 1)
print(f"median peak RSS: {short} {s / 1024:.1f} MiB ({med(short, 2):.0f} req/s), "
      f"{long} {l / 1024:.1f} MiB ({med(long, 2):.0f} req/s); ratio {long}/{short} = {l / s:.2f}")
PY
