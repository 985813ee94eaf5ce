#!/bin/sh
# selectinferd on a synthetic Gemma 4 (tiny-gemma4: local and global layers
# of different heads, the last three on earlier layers' caches, FFNs of two
# widths, per-layer embeddings read from the file): status names the
# shared caches and the per-layer embeddings; a chat's next turn and the
# same prompt again reuse what the slot holds; an answer longer than the
# context goes on past it by shifts (the shared layers' keys move with
# their sources'); a random half of each layer's own neurons loads and phi
# computes fewer; the file cut short under the daemon fails the requests
# that need its table's rows, with a reason, and nothing else.
#
# The same on a Gemma 3n (tiny-gemma3n: 25 layers, the last five on
# earlier layers' caches, AltUp's streams, per-layer inputs of 256, the
# first ten layers' activations cut) with its arguments.
#
# usage: test-daemon-gemma4.sh SELECTINFERD SICTL SI_SYNTH
#            [SHAPE SHARED_LAYERS PER_LAYER_WIDTH "N of M loaded"]
set -u
daemon=$1 sictl=$2 synth=$3 shape=${4:-tiny-gemma4}
shared=${5:-3} ple=${6:-32} half=${7:-624 of 1152 loaded}
. "$(dirname "$0")/daemon-synth.sh"

start --ctx-size 160
"$sictl" --socket "$sock" status >"$dir/status" 2>&1
grep -q "shared caches: *$shared layers" "$dir/status" &&
    grep -q "per-layer embd: *$ple a layer" "$dir/status" ||
    { echo "FAIL: status without the shared caches or per-layer embeddings"; cat "$dir/status";
      fail=1; }
# (this random model soon picks its end of turn, <|im_end|>: barred, and
# <|endoftext|>)
slot_checks --logit-bias 0:-100 --logit-bias 2:-100
stop

# a random half of each layer's own neurons (its FFNs of two widths), and
# phi below gamma computing fewer of them
start --mode random-load --gamma 0.5
"$sictl" --socket "$sock" status >"$dir/status2" 2>&1
# (the daemon's first layer dense: tiny-gemma4 96 + half of 5 x 96 + 3 x
# 192; tiny-gemma3n 128 + half of 24 x 128)
grep -q "$half" "$dir/status2" ||
    { echo "FAIL: a random half not of each layer's neurons"; cat "$dir/status2"; fail=1; }
"$sictl" --socket "$sock" --json generate --raw --phi 0.3 -n 6 "$p" >"$dir/phi" 2>&1
grep -q '"generated_tokens":6' "$dir/phi" && grep -q '"ffn_share":0\.[0-3]' "$dir/phi" ||
    { echo "FAIL: phi 0.3 under a random half"; tail -c 600 "$dir/phi"; cat "$dir/out"; fail=1; }
stop

start
# the file cut short under the running daemon: the per-layer table's rows
# past the cut cannot be read, a request that needs one fails with a
# reason, and the daemon goes on serving
truncate -s 200000 "$dir/m.gguf"
"$sictl" --socket "$sock" generate --raw -n 2 "zebra quantum $p" >"$dir/cut" 2>&1 &&
    { echo "FAIL: a prompt past the cut table answered"; cat "$dir/cut"; fail=1; }
grep -q "cannot be read as loaded" "$dir/cut" ||
    { echo "FAIL: no reason for the cut table"; cat "$dir/cut"; fail=1; }
"$sictl" --socket "$sock" status >"$dir/status3" 2>&1 && grep -q "state: *ready" "$dir/status3" ||
    { echo "FAIL: the daemon stopped serving after the cut"; cat "$dir/status3" "$dir/out";
      fail=1; }
stop

[ "$fail" -eq 0 ] && echo "ok: shared caches and per-layer embeddings served, prefixes reused," \
    "shifts, selection over two widths, a cut file answered with its reason"
exit "$fail"
