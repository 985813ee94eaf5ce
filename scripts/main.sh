#!/bin/sh
# Demo: sets up (packages, model, build), starts selectinferd on the default
# model on a temporary socket, streams one chat answer with sictl, prints
# the daemon's status and shuts it down cleanly.
set -eu
cd "$(dirname "$0")/.."

scripts/setup.sh
MODEL=${SI_MODEL:-$(scripts/fetch-model.sh)}
BUILD=${BUILD:-build}
tmp=$(mktemp -d)
sock=$tmp/selectinfer.sock
daemon_pid=""
cleanup() {
    if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
        kill "$daemon_pid" 2>/dev/null || true
        wait "$daemon_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

"$BUILD/daemon/selectinferd" --config "" --model "$MODEL" --socket "$sock" 2>"$tmp/daemon.log" &
daemon_pid=$!
sictl="$BUILD/client/sictl --socket $sock"

# status answers while the model loads: wait for "ready"
i=0
until $sictl --json status 2>/dev/null | grep -q '"state":"STATE_READY"'; do
    i=$((i + 1))
    if [ $i -gt 600 ] || ! kill -0 "$daemon_pid" 2>/dev/null; then
        echo "selectinferd did not become ready:" >&2
        cat "$tmp/daemon.log" >&2
        exit 1
    fi
    sleep 0.2
done

question="What is the capital of France? Answer in one sentence."
echo "> $question"
$sictl generate --temperature 0 --max-tokens 64 --stats "$question"
echo
$sictl status
echo
$sictl shutdown
status=0
wait "$daemon_pid" || status=$?
daemon_pid=""
echo "selectinferd exited with status $status"
echo "--- daemon log ---"
cat "$tmp/daemon.log"
exit $status
