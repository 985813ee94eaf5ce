#!/bin/sh
# selectinferd on a hybrid model (a synthetic Granite 4.0-H: Mamba-2 mixers
# in three layers of five; or SHAPE tiny-qwen35, a Qwen3.5: gated delta
# nets in four layers of five; or tiny-falcon-h1, a Falcon-H1: a Mamba-2
# mixer beside attention in each of five layers; or tiny-nemotron-h, a
# Nemotron-H: mixers in four layers of eight, attention or an un-gated MLP
# in the others): status names them; a chat's next turn and the
# same prompt again reuse what the slot holds (the states where they
# stand, or their checkpoint two tokens before the last prompt's end); an
# answer longer than the context goes on past it (what a shift keeps is
# evaluated again); and under a random half of the FFN's neurons, phi
# below gamma computes fewer of them beside the mixers.
#
# usage: test-daemon-hybrid.sh SELECTINFERD SICTL SI_SYNTH [SHAPE N_RECURRENT [ARG...]]
# (ARGs go to the long answer's generate: a random model's end-of-turn
# tokens barred)
set -u
daemon=$1 sictl=$2 synth=$3 shape=${4:-tiny-granitehybrid} n_rec=${5:-3}
shift $(($# < 5 ? $# : 5))
. "$(dirname "$0")/daemon-synth.sh"

start --ctx-size 160
"$sictl" --socket "$sock" status >"$dir/status" 2>&1
grep -q "recurrent layers: *$n_rec " "$dir/status" ||
    { echo "FAIL: status without the recurrent layers"; cat "$dir/status" "$dir/out"; fail=1; }
slot_checks "$@"
stop

start --mode random-load --gamma 0.5
"$sictl" --socket "$sock" --json generate --raw --phi 0.3 -n 6 "$p" >"$dir/phi" 2>&1
grep -q '"generated_tokens":6' "$dir/phi" && grep -q '"ffn_share":0\.[0-4]' "$dir/phi" ||
    { echo "FAIL: phi 0.3 under a random half"; tail -c 600 "$dir/phi"; cat "$dir/out"; fail=1; }
stop

[ "$fail" -eq 0 ] && echo "ok: recurrent layers served, prefixes reused, shifts, phi beside them"
exit "$fail"
