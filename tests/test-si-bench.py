#!/usr/bin/env python3
"""si-bench on a tiny synthetic model: greedy, sampled and selective runs
give JSON whose figures hang together (the bytes a step reads, the
roofline and the achieved rate agree with each other; phi 0.4 reads fewer
bytes than dense; --sample says so), and bad arguments are refused.

No timing is judged: the figures only have to be consistent and positive.

usage: test-si-bench.py SI_BENCH SI_SYNTH
"""
import json
import os
import subprocess
import sys
import tempfile


def run(bench, model, *extra):
    args = [bench, "-m", model, "-p", "8", "-n", "4", "-r", "1", "-t", "1", "--bw-mb", "16",
            "--json", *extra]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        sys.exit(f"si-bench {' '.join(extra)} failed ({out.returncode}): {out.stderr}")
    try:
        return json.loads(out.stdout)
    except json.JSONDecodeError as e:
        sys.exit(f"si-bench {' '.join(extra)}: not JSON ({e}): {out.stdout!r}")


def check(cond, msg):
    if not cond:
        sys.exit("FAIL: " + msg)


def main():
    bench, synth = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "tiny.gguf")
        subprocess.run([synth, "--shape", "tiny-llama3", "--out", model, "--seed", "7",
                        "--type", "f16"], check=True, capture_output=True, timeout=120)
        greedy = run(bench, model)
        sampled = run(bench, model, "--sample")
        phi = run(bench, model, "--phi", "0.4")
        for name, r in (("greedy", greedy), ("sampled", sampled), ("phi", phi)):
            for key in ("prefill_tps", "decode_tps", "step_bytes", "bandwidth_gbs",
                        "roofline_decode_tps", "weight_bytes"):
                check(r[key] > 0, f"{name}: {key} = {r[key]}")
            # achieved GB/s = step bytes x decode rate; the ratio = rate / roofline
            check(abs(r["achieved_gbs"] - r["step_bytes"] * r["decode_tps"] / 1e9)
                  <= 1e-3 * r["achieved_gbs"] + 1e-3, f"{name}: achieved_gbs inconsistent")
            check(abs(r["roofline_ratio"] - r["decode_tps"] / r["roofline_decode_tps"]) <= 1e-3,
                  f"{name}: roofline_ratio inconsistent")
        check(greedy["decode"] == "greedy" and sampled["decode"] == "sampled",
              f"decode mode: {greedy['decode']}, {sampled['decode']}")
        check(greedy["step_bytes"] == sampled["step_bytes"], "sampling changed the step bytes")
        check(greedy["ffn_share"] == 1 and abs(phi["ffn_share"] - 0.4) < 0.02,
              f"ffn_share {greedy['ffn_share']}, {phi['ffn_share']}")
        check(phi["step_bytes"] < greedy["step_bytes"], "phi 0.4 reads as much as dense")
        # arguments it must refuse
        for bad in (["--pick", "token"], ["--phi", "2"], ["-n", "0"], ["--bogus"],
                    ["--phi", "0.4", "--swap", "chat"]):  # a swap needs a profile
            out = subprocess.run([bench, "-m", model, *bad], capture_output=True, text=True,
                                 timeout=60)
            check(out.returncode == 2, f"si-bench {' '.join(bad)}: exit {out.returncode}")
    print("si-bench: greedy, sampled and phi 0.4 runs consistent; bad arguments refused")


if __name__ == "__main__":
    main()
