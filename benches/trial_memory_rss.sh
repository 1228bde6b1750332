#!/usr/bin/env bash
# Peak RSS of `throughline bench` per trial length, for two binaries (before and after a
# change), against one `serve-sim` process: one closed-loop duration trial per length.
# Usage: benches/trial_memory_rss.sh BEFORE_BIN AFTER_BIN [PRESET] [STREAMS] [TOKENS] [LENGTHS...]
# Prints: binary, trial length, output tokens, ITL count, peak RSS (KiB, GNU time's %M).
set -euo pipefail
before=$1 after=$2 preset=${3:-fast} streams=${4:-64} tokens=${5:-1024}
if [ $# -ge 5 ]; then shift 5; else shift $#; fi
lengths=("$@")
[ ${#lengths[@]} -eq 0 ] && lengths=(10s 60s)
work=$(mktemp -d)
trap 'kill "$sim_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
"$after" serve-sim --port 0 --preset "$preset" >"$work/sim.out" 2>/dev/null &
sim_pid=$!
for _ in $(seq 100); do grep -q " on " "$work/sim.out" && break; sleep 0.1; done
url=$(grep -m1 " on " "$work/sim.out" | sed 's/.* on //')
printf '%-8s %8s %12s %12s %14s\n' binary trial out_tokens itl_count peak_rss_kib
for length in "${lengths[@]}"; do
  for which in before after; do
    bin=$before; [ "$which" = after ] && bin=$after
    cat >"$work/p.toml" <<TOML
name = "rss"
[target]
endpoints = ["$url"]
engine = "openai"
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
    /usr/bin/time -f '%M' -o "$work/rss" "$bin" bench --profile "$work/p.toml" --out "$work/out" \
      --no-progress >/dev/null 2>"$work/err" || { cat "$work/err"; exit 1; }
    read -r out itl < <(python3 -c "import json,sys; t=json.load(open('$work/out/results.json'))['levels'][0]['trials'][0]; print(t['output_tokens'], (t.get('itl_ms') or {}).get('count',0))")
    printf '%-8s %8s %12s %12s %14s\n' "$which" "$length" "$out" "$itl" "$(cat "$work/rss")"
  done
done
