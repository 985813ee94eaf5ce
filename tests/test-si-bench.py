#!/usr/bin/env python3
"""si-bench on a tiny synthetic model: greedy, sampled and selective runs
give JSON whose figures hang together (the bytes a step reads, the
roofline and the achieved rate agree with each other; phi 0.4 reads fewer
bytes than dense; --sample says so), a run hot-swapped to another task of
a profile (si-profile makes one of two tasks) reads what a fresh load of
that task reads, and bad arguments are refused. --kv-type q8_0 reports a
Q8_0 cache's bytes (17/32 of f16's), hands llama-bench (a stand-in script
here) -ctk q8_0 -ctv q8_0 -fa on, and is refused on a model whose heads
are not a multiple of 32 wide. A load's peak memory (VmHWM) is the
weights and the conversions in flight, not the weights and the file's
pages as well (each conversion releases the pages it read).

No timing is judged: the figures only have to be consistent and positive.

usage: test-si-bench.py SI_BENCH SI_SYNTH SI_PROFILE
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


def two_task_profile(si_profile, model, d):
    """A profile of tasks "a" and "b" of the tiny model, made by si-profile."""
    prompts, prof = os.path.join(d, "p.jsonl"), os.path.join(d, "ab.siprof")
    texts = {"a": ["What is the capital of France?", "Name a primary colour."],
             "b": ["Translate to German: good morning", "Translate to German: the house"]}
    with open(prompts, "w") as f:
        for task, ps in texts.items():
            for i, p in enumerate(ps):
                f.write(json.dumps({"task": task, "id": f"{task}{i}", "split": "profile",
                                    "prompt": p}) + "\n")
    out = subprocess.run([si_profile, "run", "-m", model, "--prompts", prompts, "-o", prof,
                          "-t", "1", "-q"], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        sys.exit(f"si-profile run failed ({out.returncode}): {out.stderr}")
    return prof


def check_swap(bench, model, prof):
    sel = ["--phi", "0.3", "--gamma", "0.3", "--profile", prof]
    fresh = run(bench, model, *sel, "--task", "b")
    swapped = run(bench, model, *sel, "--task", "a", "--swap", "b")
    check("swap_task" not in fresh, "swap_task in a run without --swap")
    check(swapped.get("swap_task") == "b" and swapped.get("swap_ms", 0) > 0,
          f"swap: {swapped.get('swap_task')}, {swapped.get('swap_ms')} ms")
    # gamma = delta = 0.3 loads each task's own top 30 %, not topped up by
    # the merged ranking (which both tasks share); their prompts differ, so
    # a swap loads neurons (22 of 2 x 58 here)
    check(swapped.get("swap_neurons_in", 0) > 0, f"swap loaded {swapped.get('swap_neurons_in')} "
          "neurons")
    for key in ("weight_bytes", "step_bytes", "ffn_share"):
        check(swapped[key] == fresh[key], f"after a swap to b, {key} {swapped[key]} "
              f"where a load of b gives {fresh[key]}")
    check(swapped["plan"] == "selectinfer", f"plan {swapped['plan']}")
    # a task the profile does not have: a clear failure, not a run
    out = subprocess.run([bench, "-m", model, "-p", "8", "-n", "4", "-r", "1", "--bw-mb", "16",
                          *sel, "--task", "a", "--swap", "nosuch"],
                         capture_output=True, text=True, timeout=120)
    check(out.returncode == 1 and "nosuch" in out.stderr,
          f"swap to a missing task: exit {out.returncode}, {out.stderr!r}")


def check_kv(bench, synth, d, tiny):
    # two layers of SmolLM2's shape: heads of 64, which a Q8_0 cache needs
    model = os.path.join(d, "smol2.gguf")
    subprocess.run([synth, "--shape", "smollm2-135m", "--layers", "2", "--out", model, "--seed", "3",
                    "--type", "q8_0"], check=True, capture_output=True, timeout=300)
    log = os.path.join(d, "llama-args.txt")
    fake = os.path.join(d, "llama-bench")
    with open(fake, "w") as f:
        f.write("#!/usr/bin/env python3\n"
                "import json, sys\n"
                f"open({log!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
                "a = sys.argv\n"
                "p, n = int(a[a.index('-p') + 1]), int(a[a.index('-n') + 1])\n"
                "print(json.dumps([{'n_prompt': p, 'n_gen': 0, 'avg_ts': 400.0},\n"
                "                  {'n_prompt': 0, 'n_gen': n, 'avg_ts': 50.0}]))\n")
    os.chmod(fake, 0o755)
    res = {}
    for kv in ("f16", "q8_0"):
        r = run(bench, model, "--kv-type", kv, "--llama-bench", fake, "--llama-model", model)
        check(r.get("kv_type") == kv, f"kv_type {r.get('kv_type')} for {kv}")
        check(abs(r["decode_ratio"] - r["decode_tps"] / 50.0) <= 1e-3 * r["decode_ratio"] and
              abs(r["prefill_ratio"] - r["prefill_tps"] / 400.0) <= 1e-3 * r["prefill_ratio"],
              f"{kv}: ratios {r['prefill_ratio']}, {r['decode_ratio']} against 400 and 50 tok/s")
        res[kv] = r
    # 2 layers x 13 positions (8 + 4 + 1) x 192 values, K and V
    check(res["f16"]["kv_bytes"] == 2 * 13 * 2 * 192 * 2 and
          res["q8_0"]["kv_bytes"] == 2 * 13 * 2 * 6 * 34,
          f"kv_bytes {res['f16']['kv_bytes']}, {res['q8_0']['kv_bytes']}")
    with open(log) as f:
        calls = f.read().splitlines()
    check(len(calls) == 2 and "-ctk" not in calls[0] and "-ctk q8_0 -ctv q8_0 -fa on" in calls[1],
          f"llama-bench called with {calls!r}")
    # a llama-bench that crashes or fails: said how, not as "no child"
    for name, body, want in (("crash", "kill -SEGV $$", "signal 11"),
                             ("fail", "exit 3", "exit status 3")):
        bad = os.path.join(d, "llama-bench-" + name)
        with open(bad, "w") as f:
            f.write("#!/bin/sh\n" + body + "\n")
        os.chmod(bad, 0o755)
        out = subprocess.run([bench, "-m", tiny, "-p", "8", "-n", "4", "-r", "1", "--bw-mb", "16",
                              "--llama-bench", bad, "--llama-model", tiny],
                             capture_output=True, text=True, timeout=120)
        check("failed or printed no results (" in out.stderr and want in out.stderr,
              f"llama-bench that {name}es: {out.stderr!r}")
    # heads 16 wide: no Q8_0 cache, said so
    out = subprocess.run([bench, "-m", tiny, "-p", "8", "-n", "4", "-r", "1", "--bw-mb", "16",
                          "--kv-type", "q8_0"], capture_output=True, text=True, timeout=120)
    check(out.returncode == 1 and "not supported" in out.stderr.lower(),
          f"q8_0 cache on 16-wide heads: exit {out.returncode}, {out.stderr!r}")


# Under AddressSanitizer (meson's b_sanitize) VmRSS and VmHWM hold its
# shadow memory and quarantine too: no measure of the peak there.
SANITIZED = "address" in os.environ.get("SI_SANITIZE", "")


def check_peak(bench, synth, d):
    """SmolLM2's shape in Q8_0 (a 145 MB file): VmHWM within a quarter of
    the file above VmRSS after the runs, where holding the file's pages
    as well would put it a whole file above"""
    model = os.path.join(d, "smol-q8.gguf")
    subprocess.run([synth, "--shape", "smollm2-135m", "--out", model, "--seed", "3",
                    "--type", "q8_0"], check=True, capture_output=True, timeout=300)
    size = os.path.getsize(model)
    r = run(bench, model)
    over = r["vmhwm_bytes"] - r["vmrss_bytes"]
    check(SANITIZED or over < size / 4,
          f"VmHWM {r['vmhwm_bytes']} is {over} above VmRSS {r['vmrss_bytes']} "
          f"(file {size} bytes, weights {r['weight_bytes']})")
    os.unlink(model)


def main():
    bench, synth, si_profile = sys.argv[1], sys.argv[2], sys.argv[3]
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "tiny.gguf")
        subprocess.run([synth, "--shape", "tiny-llama3", "--out", model, "--seed", "7",
                        "--type", "f16"], check=True, capture_output=True, timeout=120)
        greedy = run(bench, model)
        sampled = run(bench, model, "--sample")
        phi = run(bench, model, "--phi", "0.4")
        # the exact pick among half the neurons chosen per request: the
        # bytes of phi (f16: k = 3 x 0.4 - 2 x 0.5 = 0.2 of n_ff down rows)
        cand = run(bench, model, "--phi", "0.4", "--pick", "exact", "--cand", "0.5", "--comp", "mean")
        check(cand["pick"] == "exact" and cand["cand"] == 0.5 and cand["comp"] == "mean" and
              abs(cand["ffn_share"] - 0.4) < 0.02 and cand["copy_bytes"] > 0,
              f"exact among candidates: pick {cand['pick']}, cand {cand['cand']}, "
              f"ffn_share {cand['ffn_share']}, copy_bytes {cand['copy_bytes']}")
        # a prompt long enough for the linear map, whose bytes come off
        # phi's neurons: the share stays phi's
        lin = run(bench, model, "--phi", "0.4", "--comp", "linear", "-p", "96")
        check(lin["comp"] == "linear" and abs(lin["ffn_share"] - 0.4) < 0.02 and
              lin["prefill_tps"] > 0 and lin["decode_tps"] > 0,
              f"comp linear: comp {lin['comp']}, ffn_share {lin['ffn_share']}")
        for name, r in (("greedy", greedy), ("sampled", sampled), ("phi", phi), ("cand", cand)):
            for key in ("prefill_tps", "decode_tps", "step_bytes", "bandwidth_gbs",
                        "roofline_decode_tps", "weight_bytes"):
                check(r[key] > 0, f"{name}: {key} = {r[key]}")
            # achieved GB/s = step bytes x decode rate; the ratio = rate / roofline
            check(abs(r["achieved_gbs"] - r["step_bytes"] * r["decode_tps"] / 1e9)
                  <= 1e-3 * r["achieved_gbs"] + 1e-3, f"{name}: achieved_gbs inconsistent")
            check(abs(r["roofline_ratio"] - r["decode_tps"] / r["roofline_decode_tps"]) <= 1e-3,
                  f"{name}: roofline_ratio inconsistent")
            # the shift of the last run's 12 positions: keep 4, drop 4, move 4
            check(r["shift_positions"] == 12 and r["shift_moved"] == 4 and r["shift_ms"] > 0 and
                  r["shift_reeval_ms"] > 0, f"{name}: shift {r['shift_positions']} positions, "
                  f"{r['shift_moved']} moved, {r['shift_ms']} ms, again {r['shift_reeval_ms']} ms")
        check(greedy["decode"] == "greedy" and sampled["decode"] == "sampled",
              f"decode mode: {greedy['decode']}, {sampled['decode']}")
        check(greedy["step_bytes"] == sampled["step_bytes"], "sampling changed the step bytes")
        check(greedy["ffn_share"] == 1 and abs(phi["ffn_share"] - 0.4) < 0.02,
              f"ffn_share {greedy['ffn_share']}, {phi['ffn_share']}")
        check(phi["step_bytes"] < greedy["step_bytes"], "phi 0.4 reads as much as dense")
        check_swap(bench, model, two_task_profile(si_profile, model, d))
        check_kv(bench, synth, d, model)
        check_peak(bench, synth, d)
        # arguments it must refuse
        for bad in (["--pick", "token"], ["--phi", "2"], ["-n", "0"], ["--bogus"], ["--kv-type", "q4_0"],
                    ["--phi", "0.4", "--swap", "chat"],  # a swap needs a profile
                    ["--phi", "0.4", "--cand", "0.5"],  # candidates are the exact pick's
                    ["--comp", "mean"], ["--phi", "0.4", "--comp", "median"]):
            out = subprocess.run([bench, "-m", model, *bad], capture_output=True, text=True,
                                 timeout=60)
            check(out.returncode == 2, f"si-bench {' '.join(bad)}: exit {out.returncode}")
    print("si-bench: greedy, sampled, phi 0.4 and hot-swapped runs consistent; "
          "bad arguments refused")


if __name__ == "__main__":
    main()
