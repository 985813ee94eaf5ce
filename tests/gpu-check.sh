#!/bin/bash
# Prepared check for a machine with an NVIDIA GPU and no network (about 5
# minutes on one H200; it stops starting new steps after SI_GPU_DEADLINE
# seconds, 420 by default, so that the whole run stays under 8 minutes):
#
#   1. builds with -Dcuda=enabled (only what the check needs)
#   2. runs the CUDA op tests (every kernel against the CPU backend), the
#      CUDA backend's interface test, and whole-model parity CPU vs CUDA
#      through the engine (test-cuda-model: synthetic tiny models, and the
#      default model when SI_MODEL or the cache has it; again with each
#      kernel variant, ENG_CUDA_VARIANTS), and the prompt
#      cache against fresh prefills (test-prompt-cache cuda, on a tiny
#      synthetic model)
#   3. generates synthetic f16 models with si-synth: llama-3.2-3b,
#      llama-3.2-1b, qwen2.5-3b (in parallel; reused when present)
#   4. benchmarks the kernels on each model's shapes (si-cuda-bench):
#      decode GEMV and FFN dense vs selective (phi 0.4) in GB/s against the
#      device's bandwidth, a whole decode token in a CUDA graph, prefill of
#      512 tokens dense / dense + counting / selective
#   5. whole-model speed through the engine (si-bench --backend cuda):
#      prefill and decode tok/s, achieved GB/s and share of the nominal
#      bandwidth, dense vs phi 0.4, both again with decode's L2 prefetches
#      (ENG_CUDA_VARIANTS=l2_prefetch=50), dense with the norms folded
#      into the kernels that read them (norm_fold=1), then dense decode sampled
#      (--sample: the row's candidates back, the top_cands kernel's, and
#      the host's sampler over them, against greedy's 4 bytes; then
#      --sample-row: the whole row back each token, what the candidates
#      save), then phi 0.4 picked per token by a sketch (--pick token),
#      then dense and phi 0.4 with the one-pass FFN
#      (ENG_CUDA_VARIANTS=ffn_decode=2), then dense without programmatic
#      dependent launch (ENG_CUDA_PDL=0) and op by op (ENG_CUDA_GRAPHS=0:
#      what the decode graphs gain), on each model in time
#   6. where Nsight Compute (ncu) and python3 are there (and SI_GPU_NCU is
#      not 0; SI_GPU_NCU_VARIANTS picks among dense, phi and pick; an
#      unfiltered profile took over 150 s on an H200, so only
#      the decode step's kernels are profiled): a per-kernel
#      profile of a short decode through the engine on the first model,
#      dense, phi 0.4 and phi 0.4 picked per token, launched op by op
#      (tests/ncu-summary.py: time, share and DRAM GB/s per kernel)
#   7. writes everything as JSON to $OUT (or ./gpu-results): gpu-check.json
#      (summary), bench-<model>.json,
#      engine-<model>-{dense,phi,prefetch,phiprefetch,fold,sample,samplerow,pick,fused,phifused,nopdl,direct}.json
#      and profile-<model>-{dense,phi,pick}.json, with logs beside them.
#
# Usage: tests/gpu-check.sh          (from anywhere; BUILD, MODEL_DIR, OUT, SI_GPU_MODELS,
#                                     SI_GPU_DEADLINE, SI_GPU_NCU override)
#        SI_GPU_PREBUILT=DIR tests/gpu-check.sh
#                                     skips step 1 and runs the binaries under
#                                     DIR/tests and DIR/tools, built elsewhere
#                                     with -Dcuda=enabled (a GPU machine without
#                                     the build's dependencies); when they do
#                                     not start there (a missing library), it
#                                     builds after all
#        tests/gpu-check.sh --prebuild DIR
#                                     builds those binaries here (no GPU
#                                     needed: nvcc and cuBLAS) into BUILD and
#                                     copies them, stripped (~60 MB), to
#                                     DIR/tests and DIR/tools, and archives
#                                     them as DIR.tar.xz (~13 MB); either
#                                     goes in SI_GPU_PREBUILT
# Exit status: 0 all passed, 1 a step failed, 77 no GPU here.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
TESTS="test-cuda-ops test-cuda-backend test-cuda-model test-prompt-cache test-shift"
TOOLS="si-cuda-bench si-synth si-bench"
# the CUDA backend module the engine opens (engine/backend-cuda-dl.c): not
# a link dependency of the binaries, so built by name and, prebuilt, found
# through SI_CUDA_MODULE
MODULE=engine/libselectinfer-cuda.so

if [ "${1:-}" = --prebuild ]; then
    [ -n "${2:-}" ] || { echo "usage: $0 --prebuild DIR" >&2; exit 2; }
    B=${BUILD:-$ROOT/build-gpu}
    if [ -d "$B" ]; then setup_args=--reconfigure; else setup_args=; fi
    meson setup $setup_args "$B" -Dcuda=enabled > /dev/null || exit 1
    targets=$MODULE
    for t in $TESTS; do targets="$targets tests/$t"; done
    for t in $TOOLS; do targets="$targets tools/$t"; done
    ninja -C "$B" $targets || exit 1
    rm -rf "$2"
    mkdir -p "$2/tests" "$2/tools" "$2/engine" || exit 1
    for t in $TESTS; do cp "$B/tests/$t" "$2/tests/" || exit 1; done
    for t in $TOOLS; do cp "$B/tools/$t" "$2/tools/" || exit 1; done
    cp "$B/$MODULE" "$2/engine/" || exit 1
    strip "$2"/tests/* "$2"/tools/* "$2/$MODULE" || exit 1
    # each binary holds the same kernels: a solid archive is a fifth of the
    # files (what a GPU machine with a size limit on what travels takes)
    tar cf - -C "$(dirname "$2")" "$(basename "$2")" | xz -T0 -6 > "$2.tar.xz" || exit 1
    du -sh "$2" "$2.tar.xz"
    exit 0
fi
OUT_DIR=${OUT:-$ROOT/gpu-results}
BUILD=${BUILD:-$ROOT/build-gpu}
MODEL_DIR=${MODEL_DIR:-/tmp/si-gpu-models}
DEADLINE=${SI_GPU_DEADLINE:-420}
MODELS=${SI_GPU_MODELS:-"llama-3.2-3b llama-3.2-1b qwen2.5-3b"}
mkdir -p "$OUT_DIR" "$MODEL_DIR"
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
log() { echo "[gpu-check $(elapsed)s] $*"; }

status=0
test_rc=-1
cuda_backend_rc=-1
cuda_model_rc=-1
cuda_prompt_cache_rc=-1
steps=""
note() { steps="$steps${steps:+, }\"$1\": \"$2\""; }

# "name": [the files' JSON objects, comma-separated] (no newline after)
json_array() {
    local name=$1 first=1 f
    shift
    echo "  \"$name\": ["
    for f in "$@"; do
        [ -s "$f" ] || continue
        [ $first = 1 ] || echo "    ,"
        sed 's/^/    /' "$f"
        first=0
    done
    printf '  ]'
}

finish() {
    {
        echo "{"
        echo "  \"elapsed_s\": $(elapsed),"
        echo "  \"cuda_ops_test_rc\": $test_rc,"
        echo "  \"cuda_backend_test_rc\": $cuda_backend_rc,"
        echo "  \"cuda_model_test_rc\": $cuda_model_rc,"
        echo "  \"cuda_prompt_cache_test_rc\": $cuda_prompt_cache_rc,"
        echo "  \"steps\": {${steps}},"
        local benches=()
        for m in $MODELS; do benches+=("$OUT_DIR/bench-$m.json"); done
        json_array models "${benches[@]}"
        echo ","
        json_array engine "$OUT_DIR"/engine-*.json
        echo ","
        json_array profiles "$OUT_DIR"/profile-*.json
        echo
        echo "}"
    } > "$OUT_DIR/gpu-check.json"
    log "done (status $status): $OUT_DIR/gpu-check.json"
    exit $status
}

command -v nvidia-smi > /dev/null && nvidia-smi > "$OUT_DIR/nvidia-smi.txt" 2>&1

# prebuilt binaries, or their archive (--prebuild's DIR.tar.xz): unpacked
# beside the models, not into the results
if [ -f "${SI_GPU_PREBUILT:-}" ]; then
    rm -rf "$MODEL_DIR/prebuilt"
    mkdir -p "$MODEL_DIR/prebuilt" &&
        xz -dc "$SI_GPU_PREBUILT" | tar xf - -C "$MODEL_DIR/prebuilt" --strip-components=1 ||
        log "cannot unpack $SI_GPU_PREBUILT"
    SI_GPU_PREBUILT=$MODEL_DIR/prebuilt
fi
# exit 127 is the loader's "cannot run this at all"
if [ -n "${SI_GPU_PREBUILT:-}" ]; then
    "$SI_GPU_PREBUILT/tools/si-synth" --help > "$OUT_DIR/prebuilt.log" 2>&1
    if [ $? = 127 ] || [ ! -x "$SI_GPU_PREBUILT/tests/test-cuda-model" ] ||
        [ ! -f "$SI_GPU_PREBUILT/$MODULE" ]; then
        log "prebuilt binaries in $SI_GPU_PREBUILT do not run here; building"
        cat "$OUT_DIR/prebuilt.log"
    else
        BUILD=$SI_GPU_PREBUILT
        note build prebuilt
    fi
fi

[ "$BUILD" = "${SI_GPU_PREBUILT:-}" ] || for tool in meson ninja nvcc; do
    if ! command -v $tool > /dev/null; then
        log "$tool not found"
        note setup "missing $tool"
        status=1
        finish
    fi
done

# 1. build
if [ "$BUILD" = "${SI_GPU_PREBUILT:-}" ]; then
    log "using the binaries in $BUILD"
else
    log "meson setup $BUILD -Dcuda=enabled"
    if [ -d "$BUILD" ]; then setup_args=--reconfigure; else setup_args=; fi
    if ! meson setup $setup_args "$BUILD" -Dcuda=enabled > "$OUT_DIR/setup.log" 2>&1; then
        tail -30 "$OUT_DIR/setup.log"
        note setup failed
        status=1
        finish
    fi
    log "building"
    targets=$MODULE
    for t in $TESTS; do targets="$targets tests/$t"; done
    for t in $TOOLS; do targets="$targets tools/$t"; done
    if ! ninja -C "$BUILD" $targets > "$OUT_DIR/build.log" 2>&1; then
        tail -40 "$OUT_DIR/build.log"
        note build failed
        status=1
        finish
    fi
    note build ok
fi

# the module of these binaries, wherever they were built
export SI_CUDA_MODULE="$BUILD/$MODULE"

# 3 (started early): the models are written while the tests run
synth_pids=""
for m in $MODELS; do
    f="$MODEL_DIR/$m-f16.gguf"
    if [ ! -s "$f" ]; then
        # si-synth writes FILE.tmp and renames it when complete
        "$BUILD/tools/si-synth" --shape "$m" --out "$f" --type f16 > "$OUT_DIR/synth-$m.log" 2>&1 &
        synth_pids="$synth_pids $!"
    fi
done

# 2. tests
log "CUDA op tests"
"$BUILD/tests/test-cuda-ops" > "$OUT_DIR/test-cuda-ops.log" 2>&1
test_rc=$?
tail -5 "$OUT_DIR/test-cuda-ops.log"
case $test_rc in
    0) note cuda_ops passed ;;
    77) note cuda_ops skipped; status=77 ;;
    *) note cuda_ops failed; status=1 ;;
esac
if [ $test_rc = 77 ]; then
    log "no GPU: nothing to benchmark"
    for p in $synth_pids; do kill "$p" 2> /dev/null; done
    finish
fi

# the CUDA backend through its interface, then whole models CPU vs CUDA
for t in cuda-backend cuda-model; do
    log "test $t"
    args=
    [ $t = cuda-model ] && args="$BUILD/tools/si-synth"
    timeout 300 "$BUILD/tests/test-$t" $args > "$OUT_DIR/test-$t.log" 2>&1
    rc=$?
    tail -40 "$OUT_DIR/test-$t.log"
    eval "${t//-/_}_rc=$rc"
    case $rc in
        0) note "$t" passed ;;
        77) note "$t" skipped ;;
        *) note "$t" "failed ($rc)"; status=1 ;;
    esac
done

# whole models again with each kernel variant not yet the default
# (ENG_CUDA_VARIANTS): the decode FFN's other ways, the attention's
# splits combined in its kernel
for v in ffn_decode=1 ffn_decode=2 attn_combine=1 l2_prefetch=50 norm_fold=1; do
    log "test cuda-model $v"
    ENG_CUDA_VARIANTS=$v timeout 300 "$BUILD/tests/test-cuda-model" "$BUILD/tools/si-synth" \
        > "$OUT_DIR/test-cuda-model-$v.log" 2>&1
    rc=$?
    tail -3 "$OUT_DIR/test-cuda-model-$v.log"
    case $rc in
        0) note "cuda-model_$v" passed ;;
        77) note "cuda-model_$v" skipped ;;
        *) note "cuda-model_$v" "failed ($rc)"; status=1 ;;
    esac
done

# the prompt cache on the device: kept prefixes against fresh prefills
log "test cuda-prompt-cache"
if "$BUILD/tools/si-synth" --shape tiny --out "$MODEL_DIR/tiny-f16.gguf" > "$OUT_DIR/synth-tiny.log" 2>&1; then
    SI_MODEL="$MODEL_DIR/tiny-f16.gguf" timeout 120 "$BUILD/tests/test-prompt-cache" cuda \
        > "$OUT_DIR/test-cuda-prompt-cache.log" 2>&1
    cuda_prompt_cache_rc=$?
else
    cuda_prompt_cache_rc=1
fi
tail -5 "$OUT_DIR/test-cuda-prompt-cache.log" 2> /dev/null
case $cuda_prompt_cache_rc in
    0) note cuda-prompt-cache passed ;;
    77) note cuda-prompt-cache skipped ;;
    *) note cuda-prompt-cache "failed ($cuda_prompt_cache_rc)"; status=1 ;;
esac

# the context shift on the device: keys rotated in the cache (synthetic
# models of three rope layouts; no default model on this machine)
log "test cuda-shift"
SI_TEST_DEFAULT_MODEL=0 timeout 120 "$BUILD/tests/test-shift" "$BUILD/tools/si-synth" cuda \
    > "$OUT_DIR/test-cuda-shift.log" 2>&1
cuda_shift_rc=$?
tail -5 "$OUT_DIR/test-cuda-shift.log"
case $cuda_shift_rc in
    0) note cuda-shift passed ;;
    77) note cuda-shift skipped ;;
    *) note cuda-shift "failed ($cuda_shift_rc)"; status=1 ;;
esac

# wait for the models, but not past the deadline (si-synth is CPU bound:
# on a loaded machine it is the slowest step)
for p in $synth_pids; do
    while kill -0 "$p" 2> /dev/null && [ "$(elapsed)" -lt "$DEADLINE" ]; do sleep 1; done
    if kill -0 "$p" 2> /dev/null; then
        kill "$p" 2> /dev/null
        note synth "killed at the deadline"
    fi
    wait "$p" 2> /dev/null || true
done
log "models ready: $(ls "$MODEL_DIR" | tr '\n' ' ')"

# 5. whole-model speed through the engine on model $1: dense, then phi 0.4
# (coreinfer plan: no profile needed; decode computes 40 % of the FFN
# neurons), both again with L2 prefetches, dense with the folded norm,
# then dense sampled (from the
# candidates, then from the row), then phi 0.4 picked per token (the plan
# keeps a 4-bit sketch), then the one-pass FFN, then dense without
# dependent launch and without decode graphs (known from earlier runs, so
# last). Run right after each model's kernel benchmark, so the first model
# gets them before the deadline.
engine_bench() {
    local m=$1 f="$MODEL_DIR/$1-f16.gguf" v extra graphs
    for v in dense phi prefetch phiprefetch fold sample samplerow pick fused phifused nopdl direct; do
        if [ "$(elapsed)" -ge "$DEADLINE" ]; then
            note "engine_${m}_$v" "skipped (deadline)"
            continue
        fi
        extra=
        graphs=1
        [ $v = phi ] && extra="--phi 0.4"
        [ $v = pick ] && extra="--phi 0.4 --pick token"
        [ $v = sample ] && extra="--sample"
        [ $v = samplerow ] && extra="--sample-row"
        [ $v = direct ] && graphs=0
        pdl=1
        [ $v = nopdl ] && pdl=0
        variants=
        [ $v = fused ] && variants=ffn_decode=2
        [ $v = phifused ] && { variants=ffn_decode=2; extra="--phi 0.4"; }
        [ $v = prefetch ] && variants=l2_prefetch=50
        [ $v = phiprefetch ] && { variants=l2_prefetch=50; extra="--phi 0.4"; }
        [ $v = fold ] && variants=norm_fold=1
        log "engine $m $v"
        if ENG_CUDA_GRAPHS=$graphs ENG_CUDA_PDL=$pdl ENG_CUDA_VARIANTS=$variants timeout 180 "$BUILD/tools/si-bench" -m "$f" --backend cuda \
            -p 512 -n 128 -r 3 $extra \
            --json > "$OUT_DIR/engine-$m-$v.json" 2> "$OUT_DIR/engine-$m-$v.log"; then
            note "engine_${m}_$v" ok
            cat "$OUT_DIR/engine-$m-$v.json"
        else
            note "engine_${m}_$v" failed
            tail -5 "$OUT_DIR/engine-$m-$v.log"
            rm -f "$OUT_DIR/engine-$m-$v.json"
            status=1
        fi
    done
}

# 6. per-kernel profile of a short decode (prompt of 16, 4 steps, op by op)
# on model $1, dense, phi 0.4 and phi 0.4 picked per token, where ncu and
# python3 are there
ncu_profile() {
    local m=$1 f="$MODEL_DIR/$1-f16.gguf" v extra ncu
    ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -1)
    if [ "${SI_GPU_NCU:-1}" = 0 ]; then
        note "profile_$m" "skipped (SI_GPU_NCU=0)"
        return
    fi
    if [ -z "$ncu" ] || ! command -v python3 > /dev/null; then
        note "profile_$m" "no ncu or python3"
        return
    fi
    for v in ${SI_GPU_NCU_VARIANTS:-dense phi pick}; do
        if [ "$(elapsed)" -ge "$DEADLINE" ]; then
            note "profile_${m}_$v" "skipped (deadline)"
            continue
        fi
        extra=
        [ $v = phi ] && extra="--phi 0.4"
        [ $v = pick ] && extra="--phi 0.4 --pick token"
        log "profile $m $v"
        # only the kernels of a decode step: every launch of the run
        # (loading, cuBLAS prefill, the shift check) took past 150 s on
        # Llama-3.2-3B; norms, ropes and the combine of the 16-token
        # prefill still pass the filter
        if ENG_CUDA_GRAPHS=0 timeout 150 "$ncu" --clock-control none --csv \
            --kernel-name-base function \
            -k "regex:^k_(gemv|rmsnorm|rope_store|attention_decode|attention_combine|ffn_act|ffn_down|ffn_reduce|argmax|pick_score|pick_select)" \
            --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
            "$BUILD/tools/si-bench" -m "$f" --backend cuda -p 16 -n 4 -r 1 $extra \
            > "$OUT_DIR/profile-$m-$v.csv" 2> "$OUT_DIR/profile-$m-$v.log" &&
            python3 "$ROOT/tests/ncu-summary.py" "$OUT_DIR/profile-$m-$v.csv" \
                "$OUT_DIR/profile-$m-$v.json" "$m $v"; then
            note "profile_${m}_$v" ok
        else
            note "profile_${m}_$v" failed
            tail -5 "$OUT_DIR/profile-$m-$v.log"
            rm -f "$OUT_DIR/profile-$m-$v.json"
        fi
    done
}

# 4. benchmarks (and 5. after each; 6. after the first)
profiled=0
for m in $MODELS; do
    f="$MODEL_DIR/$m-f16.gguf"
    if [ "$(elapsed)" -ge "$DEADLINE" ]; then
        log "deadline: skipping $m"
        note "bench_$m" "skipped (deadline)"
        continue
    fi
    if [ ! -s "$f" ]; then
        note "bench_$m" "no model"
        status=1
        continue
    fi
    log "benchmark $m"
    if timeout 240 "$BUILD/tools/si-cuda-bench" --model "$f" --name "$m" --phi 0.4 --ctx 1024 \
        --prefill 512 --iters 20 --json "$OUT_DIR/bench-$m.json" > "$OUT_DIR/bench-$m.log" 2>&1; then
        note "bench_$m" ok
    else
        note "bench_$m" failed
        status=1
    fi
    cat "$OUT_DIR/bench-$m.log"
    engine_bench "$m"
    if [ $profiled = 0 ]; then
        ncu_profile "$m"
        profiled=1
    fi
done

finish
