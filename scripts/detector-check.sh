#!/usr/bin/env bash
# Does "arrived" mean arrived? A check of the client's lateness detector (issue 34 item 1).
#
# The load times each chunk by the kernel's receive stamp (SO_TIMESTAMPNS) and calls a read
# late when its data waited in the socket past half the token gap. This script runs the
# simulator at a fixed cadence (every decode step TOKEN_MS long, so the true inter-token gap
# is known) under five conditions and prints, per trial, what the detector saw beside what
# the figures say:
#   quiet      client on core 0, server on core 1, nothing else running;
#   quota      the server held to QUOTA_US per 100 ms of CPU (default 3 ms: 3% of a core) by a
#              cgroup v1 cpu quota (a throttled server, whose writes stall each period:
#              its chunks leave late, which must read as a slower server, not a late client);
#   busy       a nice -n 19 busy loop on the client's core (a neighbour);
#   same-core  client and server on one core (each waits for the other's time slice);
#   slow-gaps  quiet, with 20 ms gaps (the client's core idles between chunks, so a read
#              waits for the core to wake: the VM case, where a halted vCPU wakes late).
# Read it as: ITL p50 at TOKEN_MS means the kernel stamps mark arrival; read delays beside the
# runtime's own wake-up lag say whether late reads are the client's work or its core waking.
#
# Usage: scripts/detector-check.sh [OUT] (root and cgroup v1's cpu controller for the quota
# case; the release binary, `cargo build --release`, or BIN=PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-/tmp/throughline-detector-check}"
BIN="${BIN:-$PWD/target/release/throughline}"
TOKEN_MS="${TOKEN_MS:-5}"
mkdir -p "$OUT"
# ONLY="quota busy" runs just those conditions.
wanted() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }
QUOTA=/sys/fs/cgroup/cpu/throughline-detector-quota
busy=""
trap '[ -n "$busy" ] && kill "$busy" 2>/dev/null; rmdir "$QUOTA" 2>/dev/null; true' EXIT
if wanted quota; then
    if [ ! -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
        echo "the quota case needs cgroup v1's cpu controller at /sys/fs/cgroup/cpu" >&2
        exit 2
    fi
    mkdir -p "$QUOTA"
    echo 100000 >"$QUOTA/cpu.cfs_period_us"
    echo "${QUOTA_US:-3000}" >"$QUOTA/cpu.cfs_quota_us"
fi

cat >"$OUT/profile.toml" <<'EOF'
name = "detector-check"
[target]
endpoints = ["http://127.0.0.1:39111"]
[workload]
input_tokens = 8
max_tokens = 32
ignore_eos = true
[sweep]
concurrency = [1, 8, 64]
requests_per_level = 32
warmup_requests = 4
trials = 3
EOF

# run NAME TOKEN_MS SERVER_CORE CLIENT_CORE [quota]
run() {
    local name="$1" token_ms="$2" server_core="$3" client_core="$4" quota="${5:-}"
    local sim="exec taskset -c $server_core $BIN serve-sim --port 39111 --preset fixed \
--token-delay-ms $token_ms --max-running 1000"
    if [ -n "$quota" ]; then sim="echo \$\$ > $QUOTA/cgroup.procs; $sim"; fi
    sh -c "$sim" >"$OUT/$name.sim.log" 2>&1 &
    local server=$!
    for _ in $(seq 50); do
        curl -sf http://127.0.0.1:39111/v1/models >/dev/null 2>&1 && break
        sleep 0.1
    done
    rm -rf "$OUT/$name"
    taskset -c "$client_core" "$BIN" bench -p "$OUT/profile.toml" -o "$OUT/$name" \
        --no-progress --no-plots >"$OUT/$name.log" 2>&1 || true
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    python3 - "$OUT/$name/results.json" "$name" "$token_ms" <<'PY'
import json, sys
path, name, token_ms = sys.argv[1], sys.argv[2], float(sys.argv[3])
try:
    run = json.load(open(path))
except OSError:
    print(f"{name}: no results (see its log)")
    sys.exit()
for level in run["levels"]:
    for t in level["trials"]:
        c = t.get("client") or {}
        itl = (t.get("itl_ms") or {})
        reads, late = c.get("reads") or 0, c.get("late_reads") or 0
        chunks, merged = c.get("chunks") or 0, c.get("late_merged_chunks") or 0
        def ms(x):
            return "-" if x is None else f"{x:.2f}"
        print(
            f"{name:9} C={level['concurrency']:<3} trial {t['trial']}: gap {token_ms:.0f} ms, "
            f"ITL p50 {ms(itl.get('p50'))} p99 {ms(itl.get('p99'))} | wake lag p50 "
            f"{ms(c.get('lag_p50_ms'))} p99 {ms(c.get('lag_p99_ms'))} | read delay p50 "
            f"{ms(c.get('read_delay_p50_ms'))} p99 {ms(c.get('read_delay_p99_ms'))} "
            f"(limit {ms(c.get('read_delay_limit_ms'))}) | late reads {late}/{reads} "
            f"({100 * late / max(reads, 1):.1f}%), merged chunks {merged}/{chunks} | held "
            f"{100 * (c.get('held_share') or 0):.2f}% | cpu {100 * c.get('cpu_fraction', 0):.0f}% | "
            f"saturated {c.get('saturated')} flagged {c.get('client_bound')}"
        )
PY
}

exec > >(tee "$OUT/detector.txt")
if wanted quiet; then run quiet "$TOKEN_MS" 1 0; fi
if wanted quota; then run quota "$TOKEN_MS" 1 0 quota; fi
if wanted busy; then
    nice -n 19 taskset -c 0 sh -c 'while :; do :; done' &
    busy=$!
    run busy "$TOKEN_MS" 1 0
    kill "$busy"
    busy=""
fi
if wanted same-core; then run same-core "$TOKEN_MS" 0 0; fi
if wanted slow-gaps; then run slow-gaps 20 1 0; fi
