# Sourced by the daemon tests that serve a synthetic model (daemon-moe,
# daemon-hybrid): with daemon, synth and shape set, it makes $dir (removed
# at exit, the daemon stopped), writes $dir/m.gguf of that shape (weights
# of si-synth's --type $type where type is set), and
# defines start (the daemon on it with extra flags, waiting for its
# socket $sock), stop, num KEY FILE (the N of "KEY":N in FILE), and
# slot_checks (with sictl set).
pid=
fail=0
dir=$(mktemp -d "/tmp/si-$shape-XXXXXX") || exit 1
trap '[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
sock=$dir/s.sock

"$synth" --shape "$shape" --out "$dir/m.gguf" --seed 1 ${type:+--type "$type"} >/dev/null 2>&1 ||
    { echo "si-synth failed"; exit 1; }

start() {
    : >"$dir/out" # (before the background job's redirection, which the wait below reads)
    "$daemon" --config "" --model "$dir/m.gguf" --socket "$sock" "$@" >"$dir/out" 2>&1 &
    pid=$!
    i=0
    while [ $i -lt 100 ] && ! grep -q "Ready\|Loading model" "$dir/out"; do
        sleep 0.2; i=$((i + 1))
    done
    sleep 0.5
}
stop() {
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    pid=
}
num() { grep -o "\"$1\":[0-9]*" "$2" | head -n 1 | cut -d: -f2; }
# What a slot keeps, on a daemon started with --ctx-size 160: a chat's
# second turn reuses the first's positions; the same prompt again keeps
# all but its last 2 ($p is that prompt); an answer of 200 tokens goes on
# past the context by shifts (the arguments go to that generate: a random
# model's end of turn barred where it would win).
slot_checks() {
    printf 'Hello there\nAnd again\n' |
        "$sictl" --socket "$sock" chat --stats -n 4 >/dev/null 2>"$dir/chat"
    turn2=$(grep "STOP" "$dir/chat" | sed -n 2p)
    echo "$turn2" | grep -q "([1-9][0-9]* cached)" ||
        { echo "FAIL: the chat's second turn reused nothing"; cat "$dir/chat"; fail=1; }
    p="The sky is blue and the grass is green"
    "$sictl" --socket "$sock" --json generate --raw -n 3 "$p" >"$dir/g1" 2>&1
    "$sictl" --socket "$sock" --json generate --raw -n 3 "$p" >"$dir/g2" 2>&1
    n=$(num prompt_tokens "$dir/g2") c=$(num cached_tokens "$dir/g2")
    [ -n "$n" ] && [ "$c" = "$((n - 2))" ] ||
        { echo "FAIL: the same prompt again kept ${c:-?} of ${n:-?}"; cat "$dir/g1" "$dir/g2";
          fail=1; }
    "$sictl" --socket "$sock" --json generate --raw -n 200 "$@" "$p" >"$dir/long" 2>&1
    grep -q '"generated_tokens":200' "$dir/long" && [ "$(num context_shifts "$dir/long")" -gt 0 ] ||
        { echo "FAIL: no answer of 200 tokens in a context of 160"; tail -c 600 "$dir/long";
          fail=1; }
}
