#!/bin/sh
# Installs what is needed (Debian packages, the default model), builds, and
# runs the whole test suite. Extra arguments go to `meson test`.
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh
SI_MODEL=${SI_MODEL:-$(scripts/fetch-model.sh)}
export SI_MODEL
exec meson test -C build --print-errorlogs --num-processes 2 "$@"
