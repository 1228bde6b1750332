#!/usr/bin/env bash
# The composite action's logic (action.yml at the repository root), kept here so that a test
# can run it (tests/it/alone/action_recipe.rs) and a job can run it by hand. Two steps, each reading
# the action's inputs from INPUT_* variables:
#
#   action.sh install
#       Puts a prebuilt throughline on the runner and prints its path (also as `bin=` to
#       $GITHUB_OUTPUT and its folder to $GITHUB_PATH). No Rust, no build.
#         INPUT_BINARY      a throughline already on the machine: used as it is, nothing is
#                           downloaded (a runner that keeps one installed; the tests)
#         INPUT_VERSION     the release tag, e.g. v0.1.0 (default ACTION_REF, the tag in
#                           `uses: your-org/throughline@v0.1.0`: one pin for action and binary)
#         INPUT_REPOSITORY  owner/name to download from (default ACTION_REPOSITORY)
#         THROUGHLINE_DOWNLOAD_URL  where the release assets are, default
#                           https://github.com/OWNER/NAME/releases/download (a mirror, or
#                           file:///folder in the tests)
#       The asset is throughline-ARCH-unknown-linux-musl.tar.gz (ARCH from `uname -m`:
#       x86_64 or aarch64; static, any glibc) and its checksum file ASSET.sha256, both made by
#       .github/workflows/release.yml. The download is refused (exit 2) unless its SHA-256
#       equals the one in the checksum file.
#         RUNNER_TOOL_CACHE  where the runner keeps tools between jobs (set by the runner):
#                           the verified binary is kept in
#                           $RUNNER_TOOL_CACHE/throughline/VERSION/ARCH/ with the SHA-256 it
#                           had when it was verified (throughline.sha256 beside it), and a
#                           later job uses that copy, without downloading, when the binary
#                           still has that SHA-256 and runs; any other copy is replaced by a
#                           new verified download. Unset or empty: nothing is kept.
#
#   action.sh run
#       Runs `throughline ci` against the servers the job already started, or starts them
#       itself (server commands and slots), and exits with its exit code (0 pass or
#       inconclusive, 1 regression, 2 could not measure, 3 not comparable).
#         THROUGHLINE_BIN   the binary (default `throughline` on PATH)
#         INPUT_BASELINE    the baseline file (required)
#         INPUT_BASELINE_REF, INPUT_ENDPOINTS, INPUT_BASE_ENDPOINTS (comma-separated URLs),
#         INPUT_SERVER_COMMAND, INPUT_BASE_SERVER_COMMAND, INPUT_SLOTS, INPUT_WAIT_HEALTHY,
#         INPUT_OUT (default $RUNNER_TEMP/throughline-results, else throughline-results), INPUT_ARGS (more `ci` flags, split by
#         scripts/gate-server.sh's rule: never evaluated by a shell)
#         INPUT_ALLOW_SLOWDOWN  'true' passes --allow-regression (a regression is reported as
#                           one but exits 0); 'false' or empty does not. The input alone
#                           decides: a THROUGHLINE_ALLOW_REGRESSION in the job's environment
#                           is not passed on. Anything else is refused (exit 2).
#       Writes `out=` to $GITHUB_OUTPUT; `ci` itself writes `verdict=`, `worst_ratio=`,
#       `accepted=` and `run_id=`.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# Workflow-command data: %, CR and LF escaped as GitHub reads them, so text from an input
# (a version, a path, a URL) stays one annotation and cannot start a command of its own.
escape_data() {
    local s="${1//%/%25}"
    s="${s//$'\r'/%0D}"
    printf '%s' "${s//$'\n'/%0A}"
}

fail() {
    echo "::error title=throughline action::$(escape_data "$1")" >&2
    exit 2
}

# A step output: one line `key=value`; a value holding a line break would write another key.
output() {
    case "$2" in *$'\n'* | *$'\r'*) fail "output $1 would hold a line break: $(escape_data "$2")" ;; esac
    if [ -n "${GITHUB_OUTPUT:-}" ]; then echo "$1=$2" >> "$GITHUB_OUTPUT"; fi
}

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    elif command -v shasum >/dev/null 2>&1; then
        shasum -a 256 "$1" | cut -d' ' -f1
    else
        fail "neither sha256sum nor shasum is installed: the download cannot be verified"
    fi
}

install() {
    if [ -n "${INPUT_BINARY:-}" ]; then
        [ -x "$INPUT_BINARY" ] || fail "binary: $INPUT_BINARY is not an executable file"
        finish_install "$(cd "$(dirname "$INPUT_BINARY")" && pwd)/$(basename "$INPUT_BINARY")"
        return
    fi
    local version="${INPUT_VERSION:-${ACTION_REF:-}}"
    local repo="${INPUT_REPOSITORY:-${ACTION_REPOSITORY:-}}"
    [ -n "$version" ] || fail "version: empty; set it to a release tag, e.g. v0.1.0"
    [[ "$version" =~ ^[A-Za-z0-9][A-Za-z0-9._+-]*$ ]] ||
        fail "version: '$version' is not a release tag (letters, digits, . _ + -), e.g. v0.1.0"
    local arch
    case "$(uname -s)-$(uname -m)" in
        Linux-x86_64 | Linux-amd64) arch=x86_64 ;;
        Linux-aarch64 | Linux-arm64) arch=aarch64 ;;
        *) fail "no prebuilt binary for $(uname -s) $(uname -m) (Linux x86_64 and aarch64 only): build one with cargo install --locked --path . and pass it as the binary input" ;;
    esac
    local base="${THROUGHLINE_DOWNLOAD_URL:-}"
    if [ -z "$base" ]; then
        [[ "$repo" =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]] ||
            fail "repository: '$repo' is not owner/name"
        base="https://github.com/$repo/releases/download"
    fi
    local asset="throughline-$arch-unknown-linux-musl.tar.gz"
    local url="$base/$version/$asset"
    local cache=""
    if [ -n "${RUNNER_TOOL_CACHE:-}" ]; then
        cache="$RUNNER_TOOL_CACHE/throughline/$version/$arch"
        if cached_ok "$cache"; then
            echo "throughline $version: the copy in the tool cache ($cache), its SHA-256 as verified" >&2
            finish_install "$cache/throughline"
            return
        fi
    fi
    local dir
    dir="$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/throughline-install.XXXXXX")"
    curl -fsSL --retry 3 -o "$dir/$asset" "$url" ||
        fail "could not download $url (is $version a release of ${repo:-that repository} with Linux assets?)"
    curl -fsSL --retry 3 -o "$dir/$asset.sha256" "$url.sha256" ||
        fail "could not download the checksum $url.sha256: the binary is not installed unverified"
    local want got
    want="$(cut -d' ' -f1 < "$dir/$asset.sha256" | head -n 1)"
    got="$(sha256_of "$dir/$asset")"
    [[ "$want" =~ ^[0-9a-f]{64}$ ]] || fail "$asset.sha256 holds no SHA-256 (expected 64 hex digits first)"
    [ "$want" = "$got" ] || fail "checksum mismatch for $asset: expected $want (from $asset.sha256), got $got; not installed"
    tar -xzf "$dir/$asset" -C "$dir"
    local bin="$dir/throughline-$arch-unknown-linux-musl/throughline"
    [ -x "$bin" ] || fail "$asset holds no throughline-$arch-unknown-linux-musl/throughline"
    if [ -n "$cache" ] && keep_in_cache "$bin" "$cache"; then
        bin="$cache/throughline"
    fi
    finish_install "$bin"
}

# A cached copy is used when its binary has the SHA-256 recorded when it was verified (a
# partial, damaged or replaced file is not) and it runs.
cached_ok() {
    local cache="$1" want got
    [ -f "$cache/throughline" ] && [ -x "$cache/throughline" ] && [ -f "$cache/throughline.sha256" ] ||
        return 1
    want="$(head -c 64 "$cache/throughline.sha256")"
    got="$(sha256_of "$cache/throughline")"
    if [ "$want" != "$got" ]; then
        echo "throughline: the copy in the tool cache ($cache) has another SHA-256 than when it was verified; downloading it again" >&2
        return 1
    fi
    "$cache/throughline" --version >/dev/null 2>&1
}

# Puts the verified binary into the tool cache: staged beside it, then renamed into place, so
# a job never sees half a copy. A failure only costs the cache (a warning), never the install.
keep_in_cache() {
    local bin="$1" cache="$2" stage
    stage="$(dirname "$cache")/.$(basename "$cache").$$"
    if mkdir -p "$(dirname "$cache")" && rm -rf "$stage" && mkdir "$stage" &&
        cp "$bin" "$stage/throughline" && chmod 755 "$stage/throughline" &&
        sha256_of "$stage/throughline" > "$stage/throughline.sha256" &&
        rm -rf "$cache" && mv "$stage" "$cache"; then
        echo "throughline: kept in the tool cache ($cache)" >&2
        return 0
    fi
    rm -rf "$stage"
    echo "::warning title=throughline action::$(escape_data "could not keep the binary in the tool cache ($cache); it is used from $(dirname "$bin")")" >&2
    return 1
}

finish_install() {
    local bin="$1"
    "$bin" --version >&2 || fail "$bin does not run on this machine"
    output bin "$bin"
    if [ -n "${GITHUB_PATH:-}" ]; then dirname "$bin" >> "$GITHUB_PATH"; fi
    echo "$bin"
}

run_ci() {
    local bin="${THROUGHLINE_BIN:-throughline}"
    [ -n "${INPUT_BASELINE:-}" ] || fail "baseline: empty; name the baseline file, e.g. baselines/qwen27b.toml"
    # Default: outside the checkout (RUNNER_TEMP), where nothing a pull request commits is.
    local out="${INPUT_OUT:-${RUNNER_TEMP:+$RUNNER_TEMP/throughline-results}}"
    out="${out:-throughline-results}"
    local args=(ci --baseline "$INPUT_BASELINE" --out "$out" --no-progress)
    [ -z "${INPUT_BASELINE_REF:-}" ] || args+=(--baseline-ref "$INPUT_BASELINE_REF")
    [ -z "${INPUT_WAIT_HEALTHY:-}" ] || args+=(--wait-healthy "$INPUT_WAIT_HEALTHY")
    local url urls
    if [ -n "${INPUT_ENDPOINTS:-}" ]; then
        IFS=',' read -r -a urls <<< "$INPUT_ENDPOINTS"
        for url in "${urls[@]}"; do args+=(--endpoint "$url"); done
    fi
    if [ -n "${INPUT_BASE_ENDPOINTS:-}" ]; then
        IFS=',' read -r -a urls <<< "$INPUT_BASE_ENDPOINTS"
        for url in "${urls[@]}"; do args+=(--base-endpoint "$url"); done
    fi
    [ -z "${INPUT_SERVER_COMMAND:-}" ] || args+=(--server-command "$INPUT_SERVER_COMMAND")
    [ -z "${INPUT_BASE_SERVER_COMMAND:-}" ] || args+=(--base-server-command "$INPUT_BASE_SERVER_COMMAND")
    [ -z "${INPUT_SLOTS:-}" ] || args+=(--slots "$INPUT_SLOTS")
    case "${INPUT_ALLOW_SLOWDOWN:-false}" in
        [Tt][Rr][Uu][Ee]) args+=(--allow-regression) ;;
        [Ff][Aa][Ll][Ss][Ee]) ;;
        *) fail "allow-slowdown: '${INPUT_ALLOW_SLOWDOWN}' is neither 'true' nor 'false'" ;;
    esac
    local split extra=()
    split="$(mktemp)"
    if ! "$HERE/gate-server.sh" split-args "${INPUT_ARGS:-}" > "$split" 2> "$split.err"; then
        local why
        why="$(cat "$split.err")"
        rm -f "$split" "$split.err"
        fail "args: ${why#gate-server.sh: }"
    fi
    mapfile -d '' -t extra < "$split"
    rm -f "$split" "$split.err"
    output out "$out"
    local code=0
    # `ci` reads THROUGHLINE_ALLOW_REGRESSION too: unset, so that the input alone decides.
    env -u THROUGHLINE_ALLOW_REGRESSION "$bin" "${args[@]}" "${extra[@]}" || code=$?
    return "$code"
}

case "${1-}" in
    install) install ;;
    run) run_ci ;;
    *)
        echo "usage: action.sh install|run (inputs in INPUT_* variables; see the comment at its top)" >&2
        exit 2
        ;;
esac
