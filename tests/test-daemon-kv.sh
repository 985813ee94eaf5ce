#!/bin/sh
# selectinferd refuses a KV cache it cannot keep, with a message that says
# why, instead of starting: q8_0 on a model whose attention heads are 16
# wide (a synthetic tiny model), and a cache type that does not exist.
#
# usage: test-daemon-kv.sh SELECTINFERD SI_SYNTH
set -u
daemon=$1 synth=$2
dir=$(mktemp -d /tmp/si-daemon-kv-XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT
fail=0

"$synth" --shape tiny --out "$dir/tiny.gguf" --seed 1 >/dev/null 2>&1 || { echo "si-synth failed"; exit 1; }

timeout 120 "$daemon" --config "" --model "$dir/tiny.gguf" --socket "$dir/s.sock" \
    --kv-cache-type q8_0 >"$dir/out" 2>&1
rc=$?
if [ "$rc" -ne 1 ] || ! grep -q "multiple of 32 wide; this model's are 16" "$dir/out"; then
    echo "FAIL: q8_0 cache on 16-wide heads: exit $rc"; cat "$dir/out"; fail=1
fi

timeout 60 "$daemon" --config "" --model "$dir/tiny.gguf" --socket "$dir/s.sock" \
    --kv-cache-type q4_0 >"$dir/out" 2>&1
rc=$?
if [ "$rc" -ne 2 ] || ! grep -q "not one of f16, q8_0" "$dir/out"; then
    echo "FAIL: kv_cache_type q4_0: exit $rc"; cat "$dir/out"; fail=1
fi

# the same model with the f16 cache does start (so the refusal above is the cache's)
"$daemon" --config "" --model "$dir/tiny.gguf" --socket "$dir/s.sock" >"$dir/out" 2>&1 &
pid=$!
i=0
while [ $i -lt 100 ] && ! grep -q "Ready" "$dir/out"; do sleep 0.2; i=$((i + 1)); done
grep -q "Ready" "$dir/out" || { echo "FAIL: f16 cache did not start"; cat "$dir/out"; fail=1; }
kill -TERM "$pid" 2>/dev/null
wait "$pid"

[ "$fail" -eq 0 ] && echo "ok: q8_0 on 16-wide heads and an unknown type refused, f16 starts"
exit "$fail"
