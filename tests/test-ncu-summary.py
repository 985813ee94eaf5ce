#!/usr/bin/env python3
"""tests/ncu-summary.py on a CSV in Nsight Compute's layout: launches
grouped by kernel name (templates kept, parameters dropped), units
converted (ns/us, byte/Kbyte/Mbyte, thousands separators), ncu's own
lines skipped, slowest total first, GB/s over the kernel's own time."""
import json
import os
import subprocess
import sys
import tempfile

HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
        '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
        '"Metric Value"')


def row(kid, kernel, metric, unit, value):
    return (f'"{kid}","1","si-bench","h","{kernel}","1","13","(256, 1, 1)","(640, 1, 1)","0",'
            f'"9.0","Command line profiler metrics","{metric}","{unit}","{value}"')


GEMV = "void k_gemv<1, true>(gemv_set, int, const float *)"
NORM = "k_rmsnorm(float *, const float *, const float *, float *, int, float)"
lines = ["==PROF== Connected to process 1", HEAD,
         row(0, GEMV, "dram__bytes_read.sum", "Mbyte", "31.5"),
         row(0, GEMV, "dram__bytes_write.sum", "Kbyte", "20"),
         row(0, GEMV, "gpu__time_duration.sum", "usecond", "9.5"),
         row(1, NORM, "dram__bytes_read.sum", "byte", "12,288"),
         row(1, NORM, "gpu__time_duration.sum", "nsecond", "2,048"),
         row(2, GEMV, "gpu__time_duration.sum", "usecond", "10.5"),
         row(2, GEMV, "dram__bytes_read.sum", "Gbyte", "0.0315"),
         row(2, GEMV, "dram__bytes_write.sum", "byte", "20000")]

fails = 0


def check(cond, what):
    global fails
    if not cond:
        print("FAIL:", what)
        fails += 1


with tempfile.TemporaryDirectory() as d:
    src, out = os.path.join(d, "p.csv"), os.path.join(d, "p.json")
    with open(src, "w") as f:
        f.write("\n".join(lines) + "\n")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ncu-summary.py")
    r = subprocess.run([sys.executable, script, src, out, "dense"], capture_output=True, text=True)
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    s = json.load(open(out))
    k = s["kernels"]
    check(s["label"] == "dense" and s["launches"] == 3, f"label/launches: {s['label']} {s['launches']}")
    check([g["name"] for g in k] == ["k_gemv<1, true>", "k_rmsnorm"], f"names: {[g['name'] for g in k]}")
    g, n = k[0], k[1]
    check(g["launches"] == 2 and abs(g["total_us"] - 20.0) < 1e-9, f"gemv: {g}")
    check(abs(g["dram_read_bytes"] - 63e6) < 1 and abs(g["dram_write_bytes"] - 40000) < 1e-6,
          f"gemv bytes: {g}")
    check(abs(g["gbps"] - (63e6 + 40000) / 20e3) < 1e-6, f"gemv GB/s: {g['gbps']}")
    check(abs(n["total_us"] - 2.048) < 1e-9 and n["dram_read_bytes"] == 12288, f"norm: {n}")
    check(abs(s["total_us"] - 22.048) < 1e-9 and abs(g["share"] + n["share"] - 1) < 1e-12,
          f"total/share: {s['total_us']}")
    check("k_gemv<1, true>" in r.stdout and "2 " in r.stdout, "table: " + r.stdout)
    # no table at all: an error, not an empty summary taken for a result
    with open(src, "w") as f:
        f.write("==PROF== Connected to process 1\n==ERROR== profiling failed\n")
    r = subprocess.run([sys.executable, script, src, out, "x"], capture_output=True, text=True)
    check(r.returncode != 0, "a CSV without launches was accepted")

print("ncu-summary:", "ok" if not fails else f"{fails} failures")
sys.exit(1 if fails else 0)
