#!/bin/sh
# Measures each layer's sensitivity to sparsification for si-eval's and the
# engine's lb=sens budget (ENG_BUDGET_SENS): for every layer l, si-eval runs
# selectinfer with only layer l sparsified (df=l, dl=n_layer-1-l) on the
# 'profile' split (the held-out split stays for evaluation) and the file gets
# 1 - next-token agreement with the dense model, mean over the tasks.
#
#   scripts/layer-sens.sh [-b BUILD] [-m MODEL] [-P PROFILE] [-l LIMIT] [-t THREADS]
#                         [-x "KEY=VAL,..."] [-o OUT]
#
# Defaults: 3 prompts per task of the five shipped tasks, 2 threads, gamma
# 0.7 / delta 0.3 / phi 0.4 (-x adds keys to every configuration), into
# profiles/smollm2-135m-instruct.sens. About 8 minutes on the shared 2-core
# development machine.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
MODEL=${SI_MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/selectinfer/SmolLM2-135M-Instruct.Q4_1.gguf}
PROFILE=$ROOT/profiles/smollm2-135m-instruct.siprof
OUT=$ROOT/profiles/smollm2-135m-instruct.sens
LIMIT=3
THREADS=2
EXTRA=
while getopts b:m:P:l:t:x:o: opt; do
    case $opt in
    b) BUILD=$OPTARG ;;
    m) MODEL=$OPTARG ;;
    P) PROFILE=$OPTARG ;;
    l) LIMIT=$OPTARG ;;
    t) THREADS=$OPTARG ;;
    x) EXTRA=,$OPTARG ;;
    o) OUT=$OPTARG ;;
    *) sed -n '2,14p' "$0"; exit 2 ;;
    esac
done
NL=$("$BUILD/tools/si-profile" info "$PROFILE" | sed -n 's/.* \([0-9][0-9]*\) layers.*/\1/p' | head -1)
[ -n "$NL" ] || { echo "layer-sens: cannot read the layer count of $PROFILE" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
set --
for t in qa translate-en-de translate-en-ro summarize chat; do
    set -- "$@" --prompts "$ROOT/profiles/tasks/$t.jsonl"
done
l=0
while [ "$l" -lt "$NL" ]; do
    set -- "$@" -c "selectinfer,df=$l,dl=$((NL - 1 - l)),name=L$l$EXTRA"
    l=$((l + 1))
done
"$BUILD/tools/si-eval" -m "$MODEL" -P "$PROFILE" --split profile --limit "$LIMIT" \
    --no-generate -t "$THREADS" -q --csv "$TMP/sens.csv" "$@" >/dev/null
python3 - "$TMP/sens.csv" "$OUT" "$LIMIT" <<'EOF'
import csv, sys
src, out, limit = sys.argv[1:4]
agree = {}
for r in csv.DictReader(open(src)):
    if r["config"].startswith("L"):
        agree.setdefault(int(r["config"][1:]), []).append(float(r["agreement"]))
with open(out, "w") as f:
    f.write("# Per-layer sensitivity for lb=sens: one number per layer, 1 - next-token\n"
            "# agreement with the dense model when only that layer is sparsified\n"
            "# (selectinfer defaults), mean over the tasks, %s 'profile'-split prompts\n"
            "# each. Made with scripts/layer-sens.sh (see docs/selectinfer.md).\n" % limit)
    for l in sorted(agree):
        f.write("%.4f  # layer %d\n" % (1 - sum(agree[l]) / len(agree[l]), l))
EOF
echo "wrote $OUT"
