#!/usr/bin/env bash
# Issue 50's acceptance: the docs' 1-GPU and 2-GPU recipes (docs/workflows/throughput-1gpu.yml,
# throughput-2gpu.yml) run through scripts/action.sh by hand, as a user would, against the
# simulator's 27B preset (serve-sim --preset rtxpro6000-27b) in place of vLLM: a scratch
# repository, main's baseline blessed from one bench session (docs/github-actions.md section 3),
# then a pull request's check with the recipe's inputs (slots, args) in GitHub mode.
#
#   scripts/recipes-acceptance.sh [WORK_DIR] [HEAD_SLOWDOWN]
#
# THROUGHLINE_BIN: the binary (default target/debug/throughline). HEAD_SLOWDOWN (default 1):
# serve-sim --slowdown for the head arm (1.08: a pull request 8% slower). The profile is
# section 2's, shortened for a 2-core machine (C = 1, 8; 256 tokens in, 16 out; 3 trials).
# Prints per recipe: exit code, wall time, the annotations (::warning/::error/::notice lines)
# and the verdict line.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$(realpath "${THROUGHLINE_BIN:-$ROOT/target/debug/throughline}")"
W="${1:-/tmp/throughline-recipes}"
SLOW="${2:-1}"
rm -rf "$W" && mkdir -p "$W/repo" "$W/bin" && ln -s "$BIN" "$W/bin/throughline"
export PATH="$W/bin:$PATH"
# GPU locks of its own: the slots are simulators, not this machine's GPUs.
export THROUGHLINE_LOCK_DIR="$W/locks"
cd "$W/repo" || exit 2
git init -q -b main && git config user.email acceptance@example.com && git config user.name acceptance
mkdir baselines
cat > baselines/qwen27b.profile.toml <<'P'
name = "qwen27b"
description = "docs/github-actions.md section 2's profile, shortened: C = 1, 8; 256 in, 16 out; 3 trials"

[target]
endpoints = ["http://127.0.0.1:8000"]
model = "auto"
api = "chat"
api_key_env = "VLLM_API_KEY"

[workload]
input_tokens = 256
max_tokens = 16
ignore_eos = true

[sweep]
concurrency = [1, 8]
trials = 3
warmup_requests = 8
request_timeout = "120s"
max_error_rate = 0.0

[gate]
alpha = 0.01
min_effect = 0.03
min_trials = 3
P
port=$(( 20000 + RANDOM % 20000 ))
throughline serve-sim --preset rtxpro6000-27b --port "$port" >/dev/null 2>&1 &
sim=$!
sleep 0.5
throughline bench --profile baselines/qwen27b.profile.toml -e "http://127.0.0.1:$port" \
    --out "$W/main-run" --no-progress > "$W/main-bench.txt" 2>&1 || { echo "main bench failed"; exit 2; }
kill "$sim"
throughline baseline bless -r "$W/main-run/results.json" -b baselines/qwen27b.toml \
    --profile qwen27b.profile.toml > "$W/bless.txt" 2>&1 || { echo "bless failed"; exit 2; }
git add -A && git commit -qm baseline && git checkout -q -b pr && git commit -q --allow-empty -m pr
sim_cmd='CUDA_VISIBLE_DEVICES={gpus} exec throughline serve-sim --preset rtxpro6000-27b'
recipe() { # NAME SLOTS (the recipe's `slots:` input)
    local out="$W/$1" t0 rc
    mkdir -p "$out" && : > "$out/github_output" && : > "$out/summary.md"
    t0=$(date +%s)
    GITHUB_ACTIONS=true GITHUB_OUTPUT="$out/github_output" GITHUB_STEP_SUMMARY="$out/summary.md" \
    RUNNER_TEMP="$out" THROUGHLINE_BIN="$BIN" \
    INPUT_BASELINE=baselines/qwen27b.toml INPUT_BASELINE_REF=main \
    INPUT_SERVER_COMMAND="$sim_cmd --slowdown $SLOW --port {port}" \
    INPUT_BASE_SERVER_COMMAND="$sim_cmd --port {port}" \
    INPUT_SLOTS="$2" INPUT_ARGS='--blocks 4 --max-blocks 16 --max-duration 150m --server-timeout 20m' \
    INPUT_OUT="$out/throughline-results" INPUT_ALLOW_SLOWDOWN=false \
        bash "$ROOT/scripts/action.sh" run > "$out/console.txt" 2>&1
    rc=$?
    echo "$1 (slots '$2', head slowdown $SLOW): exit $rc, $(( $(date +%s) - t0 )) s," \
        "$(grep -cE '^::(warning|error|notice)' "$out/console.txt") annotation(s);" \
        "$(grep -E '^verdict=' "$out/github_output")"
    grep -E '^::(warning|error|notice)' "$out/console.txt" | cut -c1-200
    grep -E '^(PASS|REGRESSION|INCONCLUSIVE)' "$out/console.txt" | cut -c1-200
}
recipe 1gpu '0'
recipe 2gpu '0;1'
