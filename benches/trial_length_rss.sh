#!/usr/bin/env bash
# Peak RSS of `throughline bench` by trial length, with the client's CPU per chunk beside it:
# one closed-loop duration trial per run against one `serve-sim` process, for each cell
# (concurrency x telemetry x length), the binaries side by side (before, after, before,
# after, ...), REPEATS times; prints every run, then per binary the medians with each
# length's peak over the shortest's, and per cell after/before of chunks per CPU-second.
#
# Usage: benches/trial_length_rss.sh BEFORE_BIN AFTER_BIN [LENGTHS] [STREAMS] [TELEMETRY]
#                                    [REPEATS] [TOKENS] [PRESET]
#   BEFORE_BIN  the binary before the change, or - for none
#   LENGTHS     comma-separated `sweep.duration`s (default 10s,90s,10m)
#   STREAMS     comma-separated concurrencies (default 64,512)
#   TELEMETRY   on,off (default): on = engine "auto" (the simulator's /metrics scraped about
#               once a second and its token counter cross-checked, as for vLLM); off = engine
#               "openai" (no scrapes)
#   REPEATS     runs per binary and cell (default 1); TOKENS output tokens a request (8);
#   PRESET      the simulator's preset (instant: no engine delay, so the client is busy)
#
# Columns: peak_mib = GNU time's "Maximum resident set size" of the bench process (the whole
# run: probe, connections, the trial, the result files); cpu_s = its user + system CPU;
# chunks = the trial's content chunks (`client.chunks` in results.json); us_chunk = cpu_s per
# chunk; chunks_cpu_s = chunks per CPU-second (what one fully busy client core would
# sustain). With two or more cores the simulator runs on the last core and the client on
# the others (taskset), so the CPU is the client's own.
set -euo pipefail
before=$1 after=$2
IFS=, read -r -a lengths <<<"${3:-10s,90s,10m}"
IFS=, read -r -a streams <<<"${4:-64,512}"
IFS=, read -r -a telemetry <<<"${5:-on,off}"
repeats=${6:-1} tokens=${7:-8} preset=${8:-instant}
bins=()
[ "$before" != - ] && bins+=(before)
bins+=(after)
work=$(mktemp -d)
sim_pid=
trap '[ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null; rm -rf "$work"' EXIT
cores=$(nproc)
sim_cpus= client_cpus=
if [ "$cores" -ge 2 ]; then
  sim_cpus="taskset -c $((cores - 1))"
  client_cpus="taskset -c 0-$((cores - 2))"
fi
$sim_cpus "$after" serve-sim --port 0 --preset "$preset" >"$work/sim.out" 2>/dev/null &
sim_pid=$!
for _ in $(seq 100); do grep -qs " on " "$work/sim.out" && break; sleep 0.1; done
url=$(grep -m1 " on " "$work/sim.out" | sed 's/.* on //')
[ -n "$url" ] || { echo "serve-sim did not start" >&2; exit 2; }

fmt='%-6s %5s %-9s %-7s %4s %9s %10s %9s %8s %9s %12s\n'
printf "$fmt" streams tel trial binary run requests chunks peak_mib cpu_s us_chunk chunks_cpu_s
: >"$work/rows"
for run in $(seq "$repeats"); do
  for c in "${streams[@]}"; do
    for tel in "${telemetry[@]}"; do
      engine=openai
      [ "$tel" = on ] && engine=auto
      for length in "${lengths[@]}"; do
        for which in "${bins[@]}"; do
          bin=$after
          [ "$which" = before ] && bin=$before
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
concurrency = [$c]
duration = "$length"
trials = 1
warmup_requests = 0
request_timeout = "30m"
TOML
          rm -rf "$work/out"
          $client_cpus /usr/bin/time -f '%M %U %S' -o "$work/time" "$bin" bench \
            --profile "$work/p.toml" --out "$work/out" --no-progress --no-plots \
            >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
          read -r rss user sys <"$work/time"
          read -r requests chunks < <(python3 -c "
import json
t = json.load(open('$work/out/results.json'))['levels'][0]['trials'][0]
sent = t['requests_sent'] + t.get('excluded_requests', 0)
print(sent, (t.get('client') or {}).get('chunks') or t['output_tokens'])")
          lines=$(wc -l <"$work/out/requests.jsonl")
          [ "$lines" -eq "$requests" ] || {
            echo "requests.jsonl has $lines lines for $requests requests" >&2
            exit 1
          }
          read -r mib cpu us per < <(python3 -c "
cpu = $user + $sys
print(f'{$rss / 1024:.1f} {cpu:.2f} {cpu / $chunks * 1e6:.2f} {$chunks / cpu:.0f}')")
          printf "$fmt" "$c" "$tel" "$length" "$which" "$run" "$requests" "$chunks" "$mib" \
            "$cpu" "$us" "$per"
          echo "$c $tel $length $which $mib $per" >>"$work/rows"
        done
      done
    done
  done
done
python3 - "$work/rows" "${lengths[0]}" <<'PY'
import statistics, sys
from collections import defaultdict
rows = [l.split() for l in open(sys.argv[1])]
shortest = sys.argv[2]
peak, speed = defaultdict(list), defaultdict(list)
for c, tel, length, which, mib, per in rows:
    peak[(c, tel, which, length)].append(float(mib))
    speed[(c, tel, length, which)].append(float(per))
med = lambda v: statistics.median(v)
print("\nmedian peak RSS (MiB), and over the shortest trial's:")
for (c, tel, which, length), v in sorted(peak.items()):
    base = med(peak[(c, tel, which, shortest)])
    print(f"  C={c} telemetry {tel} {which:6} {length:>5}: {med(v):7.1f}  x{med(v) / base:.2f}")
print("\nchunks per client CPU-second, after / before (same cell, side by side):")
for (c, tel, length, which), v in sorted(speed.items()):
    if which == "after" and (c, tel, length, "before") in speed:
        b = med(speed[(c, tel, length, "before")])
        print(f"  C={c} telemetry {tel} {length:>5}: {med(v):.0f} / {b:.0f} = {med(v) / b:.3f}")
PY
