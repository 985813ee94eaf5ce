#!/bin/sh
# Sweeps gamma and phi for every SelectInfer baseline with si-eval, writes
# CSV/JSON and draws plots with gnuplot (docs/selectinfer.md shows them).
#
#   scripts/sweep.sh [-b BUILD] [-m MODEL] [-P PROFILE] [-o OUTDIR] [-l LIMIT]
#                    [-t THREADS] [-g "GAMMAS"] [-p "PHIS"] [-T "TASKS"]
#                    [-x "KEY=VAL,..."] [-s "SI-EVAL ARGS"] [-n NAME]
#                    [-C CONFIGS -B BENCH] [-R]
#
# Defaults: the full grid, gamma 0.5 0.6 0.7 0.8 0.9 and phi 0.3 0.4 0.5 0.6,
# all five shipped tasks, 20 held-out prompts per task, 2 threads, into
# docs/results/NAME.{csv,json} and docs/results/NAME-*.png (NAME: sweep).
#
# -R redraws the plots from an existing NAME.csv without running si-eval.
# -x appends KEY=VAL to every configuration (e.g. "df=2,dl=2"); -s passes
# options to si-eval (e.g. "--no-generate": perplexity and agreement only,
# several times cheaper, for a machine shared with others).
#
# Configurations (delta 0.3, alpha 0.2, rank abs, dense layers as -x says):
#   load-only    gamma in GAMMAS
#   random-load  gamma in GAMMAS (everything loaded computed), and gamma 0.7
#                with phi in PHIS
#   coreinfer    phi in PHIS
#   selectinfer  every gamma in GAMMAS x phi in PHIS with delta <= phi < gamma
#                (phi = gamma, everything loaded computed, is load-only)
#
# With -C FILE the configurations come from FILE (one si-eval spec a line)
# instead, each is also timed (si-eval --bench B, -B, default 48), and the
# closing figures are drawn: task metric retained per task and
# configuration, decode speed and resident memory relative to dense.
# Plots: mean over tasks of the next-token agreement and of the task metric
# retained (score / dense score) against gamma (phi off, and phi 0.4) and
# against phi (gamma 0.7).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
MODEL=${SI_MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/selectinfer/SmolLM2-135M-Instruct.Q4_1.gguf}
PROFILE=$ROOT/profiles/smollm2-135m-instruct.siprof
OUT=$ROOT/docs/results
LIMIT=20
THREADS=2
GAMMAS="0.5 0.6 0.7 0.8 0.9"
PHIS="0.3 0.4 0.5 0.6"
TASKS="qa translate-en-de translate-en-ro summarize chat"
EXTRA=""
EVAL_ARGS=""
NAME=sweep
CONFIGS=""
BENCH=48
REPLOT=0
while getopts b:m:P:o:l:t:g:p:T:x:s:n:C:B:R opt; do
    case $opt in
    b) BUILD=$OPTARG ;;
    m) MODEL=$OPTARG ;;
    P) PROFILE=$OPTARG ;;
    o) OUT=$OPTARG ;;
    l) LIMIT=$OPTARG ;;
    t) THREADS=$OPTARG ;;
    g) GAMMAS=$OPTARG ;;
    p) PHIS=$OPTARG ;;
    T) TASKS=$OPTARG ;;
    x) EXTRA=$OPTARG ;;
    s) EVAL_ARGS=$OPTARG ;;
    n) NAME=$OPTARG ;;
    C) CONFIGS=$OPTARG ;;
    B) BENCH=$OPTARG ;;
    R) REPLOT=1 ;;
    *) sed -n '2,9p' "$0" >&2; exit 2 ;;
    esac
done
SI_EVAL=$BUILD/tools/si-eval
[ -x "$SI_EVAL" ] || [ $REPLOT = 1 ] || { echo "no $SI_EVAL: build first (meson setup build && ninja -C build)" >&2; exit 1; }
mkdir -p "$OUT"

# ---- the configurations ----
CFG=$(mktemp)
trap 'rm -f "$CFG" "$CFG".*' EXIT
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 < b - 1e-6) }'; }
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 <= b + 1e-6) }'; }
if [ -n "$CONFIGS" ]; then
    grep -v '^[[:space:]]*\(#\|$\)' "$CONFIGS" > "$CFG"
    BENCH_ARGS="--bench $BENCH"
else
    BENCH_ARGS=""
{
    echo dense
    for g in $GAMMAS; do
        echo "load-only,gamma=$g"
        echo "random-load,gamma=$g"
        for p in $PHIS; do
            if le 0.3 "$p" && lt "$p" "$g"; then echo "selectinfer,gamma=$g,phi=$p"; fi
        done
    done
    for p in $PHIS; do
        echo "coreinfer,phi=$p"
        if lt "$p" 0.7; then echo "random-load,gamma=0.7,phi=$p"; fi
    done
} | sed "s/\$/${EXTRA:+,$EXTRA}/" > "$CFG"
sed -i "s/^dense,.*/dense/" "$CFG"
fi
echo "$(wc -l < "$CFG") configurations x tasks: $TASKS, $LIMIT prompts each" >&2

SETS=""
for t in $TASKS; do SETS="$SETS --prompts $ROOT/profiles/tasks/$t.jsonl"; done
# shellcheck disable=SC2086
[ $REPLOT = 1 ] || "$SI_EVAL" -m "$MODEL" -P "$PROFILE" $SETS --limit "$LIMIT" -t "$THREADS" \
    --configs "$CFG" --csv "$OUT/$NAME.csv" --json "$OUT/$NAME.json" $BENCH_ARGS $EVAL_ARGS

# ---- plots ----
command -v gnuplot >/dev/null || { echo "no gnuplot: skipping plots" >&2; exit 0; }
if [ -n "$CONFIGS" ]; then
    # per task x configuration: score retained, agreement; per configuration:
    # decode speed and resident weights relative to dense
    awk -F, -v q="$CFG.q" -v a="$CFG.a" -v sm="$CFG.sm" '
    function col(name) { return (name in c) ? $c[name] : "" }
    NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    $c["config"] == "dense (reference)" { next }
    {
        cf = $c["config"]; t = $c["task"]
        if (!(cf in seen)) { seen[cf] = 1; cfs[++nc] = cf }
        if (!(t in tseen)) { tseen[t] = 1; ts[++nt] = t }
        # the metric retained and its 95 % interval; where the dense metric
        # is 0 (corpus BLEU of a small model) the second score, marked (s)
        # (columns an older CSV lacks read as empty)
        if (col("score_ratio") != "") {
            v[cf, t] = col("score_ratio"); lo[cf, t] = col("score_ratio_lo"); hi[cf, t] = col("score_ratio_hi")
        } else if (col("score2_ratio") != "") {
            v[cf, t] = col("score2_ratio"); lo[cf, t] = col("score2_ratio_lo"); hi[cf, t] = col("score2_ratio_hi")
            second[t] = 1
        } else {
            v[cf, t] = "NaN"
        }
        if (lo[cf, t] == "") { lo[cf, t] = v[cf, t]; hi[cf, t] = v[cf, t] }
        ag[cf, t] = $c["agreement"]
        if ($c["bench_decode_ratio"] != "") sp[cf] = $c["bench_decode_ratio"]
        mem[cf] = $c["mem_ratio"]
    }
    END {
        printf "config" > q; printf "config" > a
        for (j = 1; j <= nt; j++) {
            printf "\t%s%s\tlo\thi", ts[j], second[ts[j]] ? " (s)" : "" > q
            printf "\t%s", ts[j] > a
        }
        printf "\n" > q; printf "\n" > a
        for (i = 1; i <= nc; i++) {
            printf "%s", cfs[i] > q; printf "%s", cfs[i] > a
            for (j = 1; j <= nt; j++) {
                printf "\t%s\t%s\t%s", v[cfs[i], ts[j]], lo[cfs[i], ts[j]], hi[cfs[i], ts[j]] > q
                printf "\t%s", ag[cfs[i], ts[j]] > a
            }
            printf "\n" > q; printf "\n" > a
            printf "%s\t%s\t%s\n", cfs[i], sp[cfs[i]] != "" ? sp[cfs[i]] : "NaN", mem[cfs[i]] > sm
        }
    }' "$OUT/$NAME.csv"
    NT=$(head -1 "$CFG.a" | awk -F'\t' '{ print NF }')
    for what in q a; do
        if [ $what = q ]; then
            F=quality
            Y="task metric retained (score / dense, bars: 95 % interval; (s): sentence BLEU)"
            STYLE="errorbars gap 1 lw 1"
            PLOT="for [i=0:$NT-2] \"$CFG.q\" using (column(2+3*i)):(column(3+3*i)):(column(4+3*i)):xtic(1) title columnhead(2+3*i)"
        else
            F=agreement; Y="next-token agreement with dense"; STYLE="clustered gap 1"
            PLOT="for [i=2:$NT] \"$CFG.a\" using i:xtic(1) title columnhead(i)"
        fi
        gnuplot <<EOF
set terminal pngcairo size 1100,560 font ",10"
set output "$OUT/$NAME-$F.png"
set title "$Y per task; $LIMIT held-out prompts per task"
set style data histograms
set style histogram $STYLE
set style fill solid 0.8 border -1
set datafile separator "\t"
set datafile missing "NaN"
set key outside right
set yrange [0:*]
set grid y
set xtics rotate by -15 font ",8"
plot $PLOT
EOF
    done
    gnuplot <<EOF
set terminal pngcairo size 1100,520 font ",10"
set output "$OUT/$NAME-speed-memory.png"
set title "decode speed (--bench $BENCH tokens, best of 3) and resident weights, relative to dense"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set datafile separator "\t"
set datafile missing "NaN"
set key outside right
set yrange [0:*]
set grid y
set xtics rotate by -15 font ",8"
plot "$CFG.sm" using 2:xtic(1) title "decode tok/s / dense", "" using 3 title "resident weights / dense"
EOF
    echo "wrote $OUT/$NAME.csv, $OUT/$NAME.json and $OUT/$NAME-*.png" >&2
    exit 0
fi
# mean over tasks per configuration: mode gamma phi agreement score_ratio
# (tasks without a metric or with a dense score of 0 are left out of the
# score mean; agreement covers every task)
awk -F, '
NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
$c["config"] == "dense (reference)" { next }
{
    k = $c["mode"] " " $c["gamma"] " " $c["phi"]
    if (!(k in n)) order[++m] = k
    n[k]++; ag[k] += $c["agreement"]
    if ($c["score_ratio"] != "") { ns[k]++; sr[k] += $c["score_ratio"] }
}
END {
    for (i = 1; i <= m; i++) {
        k = order[i]
        printf "%s %.4f %s\n", k, ag[k] / n[k], ns[k] ? sprintf("%.4f", sr[k] / ns[k]) : "NaN"
    }
}' "$OUT/$NAME.csv" > "$CFG.mean"

sel() { awk -v m="$1" -v cond="$2" '
    $1 == m {
        g = $2; p = $3
        if (cond == "nophi" && (p == 0 || p + 0 >= g - 1e-6)) print
        if (cond == "phi04" && p + 0 > 0.39 && p + 0 < 0.41) print
        if (cond == "g07" && g + 0 > 0.69 && g + 0 < 0.71 && p + 0 > 0 && p + 0 < 0.7) print
        if (cond == "core" ) print
    }' "$CFG.mean" | sort -k2,2n -k3,3n; }
sel load-only nophi > "$CFG.lo"
sel random-load nophi > "$CFG.rl"
sel selectinfer phi04 > "$CFG.si4"
sel selectinfer g07 > "$CFG.sip"
sel random-load g07 > "$CFG.rlp"
sel coreinfer core > "$CFG.core"

plot_gamma() { # column title file
    gnuplot <<EOF
set terminal pngcairo size 800,500 font ",11"
set output "$OUT/$NAME-gamma-$1.png"
set title "$3 vs gamma, mean over tasks ($LIMIT prompts each)"
set xlabel "gamma"
set ylabel "$3"
set key bottom right
set grid
set yrange [0:*]
plot "$CFG.lo" using 2:$2 with linespoints title "load-only", \
     "$CFG.si4" using 2:$2 with linespoints title "selectinfer phi=0.4", \
     "$CFG.rl" using 2:$2 with linespoints title "random-load"
EOF
}
plot_phi() {
    gnuplot <<EOF
set terminal pngcairo size 800,500 font ",11"
set output "$OUT/$NAME-phi-$1.png"
set title "$3 vs phi at gamma 0.7, mean over tasks ($LIMIT prompts each)"
set xlabel "phi"
set ylabel "$3"
set key bottom right
set grid
set yrange [0:*]
plot "$CFG.sip" using 3:$2 with linespoints title "selectinfer", \
     "$CFG.core" using 3:$2 with linespoints title "coreinfer (all loaded)", \
     "$CFG.rlp" using 3:$2 with linespoints title "random-load"
EOF
}
plot_gamma agreement 4 "next-token agreement with dense"
plot_phi agreement 4 "next-token agreement with dense"
# the task metric needs generations (not with -s --no-generate)
if awk '$5 != "NaN" { found = 1 } END { exit !found }' "$CFG.mean"; then
    plot_gamma score 5 "task metric retained (score / dense)"
    plot_phi score 5 "task metric retained (score / dense)"
fi
echo "wrote $OUT/$NAME.csv, $OUT/$NAME.json and $OUT/$NAME-*.png" >&2
