#!/bin/sh
# selectinferd on a mixture-of-experts model (a synthetic Qwen3-MoE; or
# SHAPE, whose status line about its experts is EXPERTS: tiny-qwen35moe,
# a Qwen3.5-MoE with a shared expert and delta nets; tiny-gemma4-moe, a
# Gemma 4 26B-A4B with a dense MLP beside them; tiny-nemotron-h-moe, a
# Nemotron 3 Nano (un-gated experts among mixers); weights of TYPE, e.g.
# mxfp4 for tiny-gpt-oss): it
# starts, says how many experts a token computes, answers a request, and
# refuses with a reason what would choose neurons inside the experts (a
# request's phi, a swap to a selective mode, which leaves the dense plan
# serving; a selective mode at start, which fails the load).
#
# usage: test-daemon-moe.sh SELECTINFERD SICTL SI_SYNTH [SHAPE EXPERTS [TYPE]]
set -u
daemon=$1 sictl=$2 synth=$3 shape=${4:-tiny-qwen3moe}
experts=${5:-"8 a layer, 2 of them per token"} type=${6:-}
. "$(dirname "$0")/daemon-synth.sh"

start
"$sictl" --socket "$sock" status >"$dir/status" 2>&1
grep -q "experts: *$experts\$" "$dir/status" ||
    { echo "FAIL: status without the experts"; cat "$dir/status" "$dir/out"; fail=1; }
"$sictl" --socket "$sock" --json generate --raw -n 6 "The sky is" >"$dir/gen" 2>&1
grep -q '"done"' "$dir/gen" && grep -q '"generated_tokens":6' "$dir/gen" ||
    { echo "FAIL: no answer of 6 tokens"; cat "$dir/gen"; fail=1; }
"$sictl" --socket "$sock" generate --raw --phi 0.4 -n 6 "The sky is" >"$dir/phi" 2>&1
grep -q "INVALID_ARGUMENT" "$dir/phi" ||
    { echo "FAIL: phi 0.4 on experts not refused"; cat "$dir/phi"; fail=1; }
"$sictl" --socket "$sock" use dense >"$dir/use" 2>&1 ||
    { echo "FAIL: use dense on experts"; cat "$dir/use"; fail=1; }
"$sictl" --socket "$sock" use random --mode random-load --gamma 0.7 >"$dir/use" 2>&1
grep -q "SWAP_FAILED.*mixture-of-experts.*'dense' keeps serving" "$dir/use" ||
    { echo "FAIL: a selective swap on experts not refused"; cat "$dir/use"; fail=1; }
"$sictl" --socket "$sock" generate --raw -n 2 "The sky is" >/dev/null 2>&1 ||
    { echo "FAIL: no answer after the refused swap"; fail=1; }
stop

timeout 120 "$daemon" --config "" --model "$dir/m.gguf" --socket "$sock" --mode coreinfer \
    >"$dir/out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] ||
    ! grep -q "neuron selection in mixture-of-experts layers is not supported" "$dir/out"; then
    echo "FAIL: mode coreinfer on experts: exit $rc"; cat "$dir/out"; fail=1
fi

[ "$fail" -eq 0 ] && echo "ok: experts served, phi and a selective mode refused with reasons"
exit "$fail"
