#!/usr/bin/env bash
# The waves workflow (docs/workflows/throughput-waves.yml) run locally through
# scripts/action.sh: two legs per wave on the simulator, merges between.
# Usage: scripts/waves-local.sh WORKDIR HEAD_SLOWDOWN   (1.0: unchanged head; 1.1111: a 10%
# slower head). BLOCKS (default 4): blocks per leg. THROUGHLINE_BIN: the binary (default this
# checkout's target/debug/throughline). GPU ids 40-47 are "locked" as real ones would be: no
# other throughline run on this machine may use them meanwhile.
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${THROUGHLINE_BIN:-$REPO_ROOT/target/debug/throughline}"
W=$1; SLOW=$2
rm -rf "$W"; mkdir -p "$W/repo/baselines"; cd "$W/repo"
cat > baselines/w.profile.toml <<P
name = "w"
[target]
endpoints = ["http://127.0.0.1:1"]
[workload]
max_tokens = 16
ignore_eos = true
[sweep]
concurrency = [1, 4]
requests_per_level = 8
warmup_requests = 2
trials = 3
[gate]
min_trials = 3
P
# An odd-numbered GPU runs 5% faster (a slot effect by place on the node, the same on every
# "runner"); the legs of a wave give their pair's GPUs in opposite orders.
sim() { echo "exec $BIN serve-sim --port {port} --preset fast --slowdown \$(case {gpus} in *[13579]) echo $(python3 -c "print($1*0.95)");; *) echo $1;; esac)"; }
# The baseline: blessed from a relative run in blocks of the base server against itself.
$BIN bench -p baselines/w.profile.toml -o "$W/bless" --no-progress --no-plots \
  --server-command "$(sim 1.0)" --slots "40" >/dev/null
$BIN baseline bless --results "$W/bless/results.json" --baseline baselines/w.toml --profile w.profile.toml >/dev/null
git init -q && git add . && git -c user.email=a@b -c user.name=w commit -qm base && git update-ref refs/remotes/origin/main HEAD
leg() { # wave leg slots [extra args]
  local out="$W/$1/$2"; mkdir -p "$W/$1"
  local t0=$SECONDS code=0
  GITHUB_OUTPUT="$W/$1-$2.out" THROUGHLINE_BIN=$BIN INPUT_BINARY=$BIN \
  INPUT_BASELINE=baselines/w.toml INPUT_BASELINE_REF=origin/main \
  INPUT_SERVER_COMMAND="$(sim $SLOW)" INPUT_BASE_SERVER_COMMAND="$(sim 1.0)" \
  INPUT_SLOTS="$3" INPUT_OUT="$out" INPUT_ARGS="--blocks ${BLOCKS:-4} --max-blocks ${BLOCKS:-4} --allow-client-bound ${4:-}" \
    bash $REPO_ROOT/scripts/action.sh run > "$W/$1-$2.log" 2>&1 || code=$?
  echo "$1 leg $2 (slots $3): exit $code, $((SECONDS - t0)) s, $(grep '^verdict=' "$W/$1-$2.out")"
}
merge() { # name expect from...
  local name=$1 expect=$2; shift 2
  local args=(); for f in "$@"; do args+=(--from "$W/$f"); done
  local t0=$SECONDS code=0
  GITHUB_OUTPUT="$W/$name.out" $BIN merge "${args[@]}" --expect "$expect" --waves 2 -o "$W/$name" > "$W/$name.log" 2>&1 || code=$?
  echo "$name: exit $code, $((SECONDS - t0)) s, $(tr '\n' ' ' < "$W/$name.out")"
  grep -E "check:|combined verdict|undecided|judged" "$W/$name.log" | sed 's/^/  /'
  [ -f "$W/$name/pr-comment.md" ] && echo "  pr-comment.md: $(sed -n 3p "$W/$name/pr-comment.md")"
  return 0
}
T0=$SECONDS
leg wave1 a "40;41" & leg wave1 b "43;42" & wait
merge merged1 2 wave1
UNDECIDED=$(grep '^undecided=' "$W/merged1.out" | cut -d= -f2)
if [ -n "$UNDECIDED" ]; then
  echo "second wave for C=$UNDECIDED"
  leg wave2 c "44;45" "--levels $UNDECIDED" & leg wave2 d "47;46" "--levels $UNDECIDED" & wait
  merge merged 4 wave1 wave2
else
  echo "no second wave"
  merge merged 2 wave1
fi
echo "total $((SECONDS - T0)) s"
