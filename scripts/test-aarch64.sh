#!/bin/sh
# The engine on aarch64 (a Jetson's CPU), here: cross-compiled with Debian's
# gcc-aarch64-linux-gnu and run under qemu-user, the tests that need no
# model file (kernels against their references, a synthetic model's
# logits, selective decode and hot-swaps through the split backend,
# GGUF/sampling/topk units), and golden-quick: the default model against
# llama.cpp on one prompt of each golden set. This catches what an x86
# build cannot: code that only compiles for x86, the NEON and scalar
# kernels' results, and compilers that fail on our sources (gcc 12 for
# aarch64 died on a test's loop).
# Extra arguments go to `meson test`. Needs root or sudo for apt-get.
set -eu
cd "$(dirname "$0")/.."

SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
B=build-aarch64
SYS=build-aarch64-sysroot

need=
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need="$need gcc-aarch64-linux-gnu"
command -v qemu-aarch64 >/dev/null 2>&1 || need="$need qemu-user"
command -v meson >/dev/null 2>&1 || need="$need meson ninja-build"
if [ -n "$need" ]; then
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q $need
fi

# libpcre2 for arm64 (the pre-tokenizer's regexes): the Debian packages,
# unpacked beside the build rather than installed
if [ ! -f "$SYS/usr/include/pcre2.h" ]; then
    mkdir -p "$SYS/debs"
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        $SUDO dpkg --add-architecture arm64
        $SUDO apt-get update -q
    fi
    (cd "$SYS/debs" && apt-get download libpcre2-8-0:arm64 libpcre2-dev:arm64)
    for d in "$SYS"/debs/*.deb; do
        dpkg-deb -x "$d" "$SYS"
    done
fi

here=$(pwd)
lib="$here/$SYS/usr/lib/aarch64-linux-gnu"
cat >"$SYS/cross.txt" <<EOF
[binaries]
c = 'aarch64-linux-gnu-gcc'
ar = 'aarch64-linux-gnu-ar'
strip = 'aarch64-linux-gnu-strip'
pkg-config = 'false'
exe_wrapper = ['qemu-aarch64', '-L', '/usr/aarch64-linux-gnu', '-E', 'LD_LIBRARY_PATH=$lib']

[built-in options]
c_args = ['-I$here/$SYS/usr/include']
c_link_args = ['-L$lib', '-Wl,-rpath-link,$lib']

[host_machine]
system = 'linux'
cpu_family = 'aarch64'
cpu = 'cortex-a78'
endian = 'little'
EOF
[ -d "$B" ] || meson setup "$B" --cross-file "$SYS/cross.txt" -Dcuda=disabled --buildtype=release
ninja -C "$B"
# The tests that evaluate the default model stay on the x86 run (under
# qemu they would take an hour), but for golden-quick (about 2 minutes);
# model-bad only truncates a copy of it.
# The tests that write a synthetic model run si-synth through qemu too.
# Emulation runs several times slower than the x86 suite the timeouts were
# set for (backend-cpu: about 5 of its 10 minutes here): a longer leash.
# select-combos runs 300 of its seeded inputs per model, not 1000 (all of
# them took 7.5 minutes under qemu).
SI_MODEL=${SI_MODEL:-$(scripts/fetch-model.sh)}
export SI_MODEL
SI_EXE_WRAPPER="qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=$lib" SI_TEST_DEFAULT_MODEL=0 \
SI_COMBOS_INPUTS=300 \
    exec meson test -C "$B" --print-errorlogs --num-processes 2 --timeout-multiplier 3 \
    gguf gguf-bad synth chat tokenizer-spm tokenizer-spm-phi3 tokenizer-tekken tokenizer-gemma4 \
    sampling backend-cpu backend-split topk threadpool synth-ref comp select-combos \
    model-bad promptset metrics json jschema shift golden-quick "$@"
