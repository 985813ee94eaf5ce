#!/bin/sh
# Builds SelectInfer, fetches the default model and runs si-bench on it.
#
#   scripts/bench.sh [si-bench options...]      e.g. -t 2 -p 128 -n 64 --json
#
# Environment:
#   BUILD_DIR    build directory (default ./build)
#   SI_MODEL     model to benchmark (default: the fetched SmolLM2 Q4_1 file)
#   LLAMA_BENCH  path to llama.cpp's llama-bench: when set, llama.cpp runs the
#                same prompt/generation lengths and threads in the same run and
#                si-bench prints ours / llama.cpp.
#   LLAMA_MODEL  GGUF for llama-bench (default: an F16 copy of the model, made
#                once with the llama-quantize next to LLAMA_BENCH, since our
#                default storage is f16 and F16 reads the same bytes per token)
set -eu
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    meson setup "$BUILD_DIR" >&2
fi
ninja -C "$BUILD_DIR" tools/si-bench >&2

MODEL=${SI_MODEL:-$(scripts/fetch-model.sh)}

if [ -z "${LLAMA_BENCH:-}" ]; then
    exec "$BUILD_DIR/tools/si-bench" -m "$MODEL" "$@"
fi

if [ ! -x "$LLAMA_BENCH" ]; then
    echo "error: LLAMA_BENCH=$LLAMA_BENCH is not an executable" >&2
    exit 1
fi
if [ -z "${LLAMA_MODEL:-}" ]; then
    CACHE=${SI_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/selectinfer}
    LLAMA_MODEL=$CACHE/$(basename "$MODEL" .gguf).F16.gguf
    if [ ! -f "$LLAMA_MODEL" ]; then
        QUANTIZE=$(dirname "$LLAMA_BENCH")/llama-quantize
        if [ ! -x "$QUANTIZE" ]; then
            echo "error: set LLAMA_MODEL (no $QUANTIZE to make an F16 copy)" >&2
            exit 1
        fi
        echo "Writing an F16 copy of $MODEL to $LLAMA_MODEL ..." >&2
        "$QUANTIZE" --allow-requantize "$MODEL" "$LLAMA_MODEL.tmp" F16 >/dev/null 2>&1
        mv "$LLAMA_MODEL.tmp" "$LLAMA_MODEL"
    fi
fi
exec "$BUILD_DIR/tools/si-bench" -m "$MODEL" --llama-bench "$LLAMA_BENCH" --llama-model "$LLAMA_MODEL" "$@"
