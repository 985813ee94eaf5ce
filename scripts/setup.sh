#!/bin/sh
# Installs what the build needs (Debian packages), fetches the default model
# and builds into ./build (not with --no-build: for scripts that build a
# tree of their own). Safe to run again: each step is skipped when done.
# Other arguments go to `meson setup`.
set -eu
cd "$(dirname "$0")/.."
build=1
if [ "${1:-}" = "--no-build" ]; then
    build=0
    shift
fi

PKGS="meson ninja-build gcc g++ pkg-config python3 python3-pip python3-regex python3-protobuf \
protobuf-compiler libpcre2-dev libuv1-dev libprotobuf-c-dev protobuf-c-compiler \
libsystemd-dev gnuplot-nox"

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "Installing Debian packages:$missing" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >&2
fi

scripts/fetch-model.sh >/dev/null

[ "$build" -eq 1 ] || exit 0
if [ ! -f build/build.ninja ]; then
    meson setup build "$@" >&2
fi
ninja -C build >&2
