#!/bin/sh
# The test suite built with AddressSanitizer and UndefinedBehaviorSanitizer
# (build-asan): any out-of-bounds access, use after free, leak or undefined
# behaviour in the engine, the daemon, the tools or the tests fails the test
# that hit it (ASAN_OPTIONS and UBSAN_OPTIONS in tests/meson.build abort on
# the first report). The bad-input tests (truncated and fuzzed GGUF files,
# corrupt profiles, garbage frames, vanishing clients) are the point: there
# a normal build only shows that nothing crashed.
#
# Everything runs three to five times slower; the timeouts get a longer
# leash, and the tests that measure the process relax where a sanitizer
# makes the measure meaningless (SI_SANITIZE: VmRSS holds the shadow memory,
# wall-clock bounds stretch). Extra arguments go to `meson test`.
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh --no-build
SI_MODEL=${SI_MODEL:-$(scripts/fetch-model.sh)}
export SI_MODEL
B=build-asan
# -Db_lundef=false: the sanitizer runtimes resolve at run time
[ -d "$B" ] || meson setup "$B" -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled
ninja -C "$B"
exec meson test -C "$B" --print-errorlogs --num-processes 2 --timeout-multiplier 6 "$@"
