# Sourced by the daemon tests that serve a synthetic model (daemon-moe,
# daemon-hybrid): with daemon, synth and shape set, it makes $dir (removed
# at exit, the daemon stopped), writes $dir/m.gguf of that shape, and
# defines start (the daemon on it with extra flags, waiting for its
# socket $sock), stop, and num KEY FILE (the N of "KEY":N in FILE).
pid=
fail=0
dir=$(mktemp -d "/tmp/si-$shape-XXXXXX") || exit 1
trap '[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
sock=$dir/s.sock

"$synth" --shape "$shape" --out "$dir/m.gguf" --seed 1 >/dev/null 2>&1 ||
    { echo "si-synth failed"; exit 1; }

start() {
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
