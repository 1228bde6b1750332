#!/usr/bin/env bash
# The relative gate against a real engine (issue 26's acceptance): llama.cpp's llama-server
# (scripts/llama-server.sh builds it and a tiny random-weight model), two servers pinned to one
# CPU core and started by throughline itself, in blocks with their slots swapped.
#
#   scripts/gate-acceptance.sh [UNCHANGED_JOBS] [SLOW_JOBS] [OUT] [BUSY_JOBS]
#
# Runs UNCHANGED_JOBS (default 10) jobs whose head is the same server as the base, then
# SLOW_JOBS (default 3) whose head is held to 88% of its CPU (a cgroup v1 cpu quota, about
# 12% slower where decoding is CPU-bound), then BUSY_JOBS (default 0) unchanged jobs with a
# `nice -n 19` busy loop pinned to throughline's core (a neighbour on the client's core),
# each a `throughline bench` in blocks and a `gate` of its results on the DEFAULT settings (no
# --allow-client-bound), and prints one line per job: the verdict and exit code, the worst
# ratio, the slot effect and start spread the verdict reports, and what the client held; then
# the counts. Needs root (the cgroup) and a built
# llama-server (`scripts/llama-server.sh setup`); servers on core SERVER_CORE (default 1),
# throughline on the other cores.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
UNCHANGED="${1:-10}"
SLOW="${2:-3}"
OUT="${3:-$ROOT/target/gate-acceptance}"
BUSY="${4:-0}"
CORE="${SERVER_CORE:-1}"
BIN="${THROUGHLINE_BIN:-$ROOT/target/debug/throughline}"
eval "$("$ROOT/scripts/llama-server.sh" setup)"
CGROUP=/sys/fs/cgroup/cpu/throughline-slow-head
# Slot 0 runs like a slower GPU: its server held to SLOT0_QUOTA (default 95%) of the core, so
# the slot effect the blocks must cancel is about 5%; a slow head on slot 0 is held to 88% of
# that again (a nested group).
SLOT0=/sys/fs/cgroup/cpu/throughline-slot0
mkdir -p "$CGROUP" "$OUT" "$SLOT0/slow"
for g in "$SLOT0" "$SLOT0/slow"; do echo 100000 >"$g/cpu.cfs_period_us"; done
echo "${SLOT0_QUOTA:-95000}" >"$SLOT0/cpu.cfs_quota_us"
echo 88000 >"$SLOT0/slow/cpu.cfs_quota_us"
: >"$OUT/jobs.txt"
echo 100000 >"$CGROUP/cpu.cfs_period_us"
echo 88000 >"$CGROUP/cpu.cfs_quota_us"

cat >"$OUT/profile.toml" <<'EOF'
name = "llama-acceptance"
[target]
endpoints = ["http://127.0.0.1:1"]
engine = "auto"
[workload]
input_tokens = 8
max_tokens = 32
ignore_eos = true
[sweep]
concurrency = [1, 4, 8]
requests_per_level = 16
warmup_requests = 2
trials = 3
request_timeout = "60s"
[gate]
min_trials = 3
EOF

LLAMA="exec taskset -c $CORE $THROUGHLINE_LLAMA_SERVER -m $THROUGHLINE_LLAMA_MODEL --host 127.0.0.1 \
--port {port} --parallel 16 --ctx-size 4096 --metrics --chat-template chatml \
--reasoning-format none --threads 1 --no-warmup --alias tiny-llama"
# Each server joins its slot's group, then becomes the server (same process).
SERVER="if [ {slot} = 0 ]; then echo \$\$ > $SLOT0/cgroup.procs; fi; $LLAMA"
# The slow head joins the 88% group (nested in slot 0's on slot 0).
SLOW_SERVER="if [ {slot} = 0 ]; then echo \$\$ > $SLOT0/slow/cgroup.procs; else echo \$\$ > $CGROUP/cgroup.procs; fi; $LLAMA"

job() {
    local name="$1" head="$2" dir="$OUT/$1"
    rm -rf "$dir"
    local started=$SECONDS
    taskset -c 0 "$BIN" bench -p "$OUT/profile.toml" -o "$dir" --no-progress --no-plots \
        --server-command "$head" --base-server-command "$SERVER" --slots 0 \
        >"$dir.log" 2>&1 || { echo "$name: bench failed (see $dir.log)"; return; }
    local code=0
    "$BIN" gate --results "$dir/results.json" --json "$dir/verdict.json" >"$dir/gate.txt" 2>&1 \
        || code=$?
    python3 - "$dir/verdict.json" "$name" "$code" "$((SECONDS - started))" <<'PY'
import json, math, sys
v = json.load(open(sys.argv[1]))
levels = [l for l in v["levels"] if l.get("metric", "output_tok_per_s") == "output_tok_per_s"]
def pct(x): return f"{(math.exp(x) - 1) * 100:+.1f}%" if x is not None else "?"
parts = []
for l in levels:
    x = (l.get("test") or {}).get("crossover") or {}
    parts.append(f"C={l['concurrency']} {l['ratio']:.3f} [{l['ci_low']:.3f}] {l['status']} "
                 f"slot {pct(x.get('slot_effect'))} spread {100 * (x.get('start_spread') or 0):.1f}% "
                 f"blocks {x.get('blocks')}")
client = v.get("client") or {}
held = ", ".join(f"{h['arm']} {100 * h['share']:.1f}% at C={h['concurrency']}" for h in client.get("held", []))
said = f"; client: held {held or 'nothing'}, {client.get('late_read_trials', 0)} late-read trial(s), saturated {len(client.get('saturated', []))}" if client else ""
print(f"{sys.argv[2]}: {v['outcome'].upper()} (exit {sys.argv[3]}, {sys.argv[4]} s); " + "; ".join(parts) + said)
PY
}

for i in $(seq 1 "$UNCHANGED"); do job "unchanged-$i" "$SERVER" | tee -a "$OUT/jobs.txt"; done
for i in $(seq 1 "$SLOW"); do job "slow-$i" "$SLOW_SERVER" | tee -a "$OUT/jobs.txt"; done
for i in $(seq 1 "$BUSY"); do
    nice -n 19 taskset -c 0 sh -c 'while :; do :; done' &
    busy=$!
    job "busy-$i" "$SERVER" | tee -a "$OUT/jobs.txt"
    kill "$busy"
done
# The counts per kind of job: verdicts and exit 3s.
python3 - "$OUT/jobs.txt" <<'PY'
import collections, re, sys
counts = collections.defaultdict(collections.Counter)
for line in open(sys.argv[1]):
    m = re.match(r"(\w+)-\d+: (\w+) \(exit (\d+)", line)
    if m:
        counts[m.group(1)][m.group(2)] += 1
        counts[m.group(1)]["exit " + m.group(3)] += 1
for kind, c in counts.items():
    print(f"{kind}: " + ", ".join(f"{k} {n}" for k, n in sorted(c.items())))
PY
