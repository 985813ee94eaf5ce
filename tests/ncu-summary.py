#!/usr/bin/env python3
"""Per-kernel summary of an Nsight Compute CSV (ncu --csv --metrics
gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum ...).

usage: ncu-summary.py NCU.csv OUT.json [LABEL]

Groups the launches by kernel name (template arguments kept, parameters
dropped) and writes, slowest total first: launches, total and mean
duration (us), DRAM bytes read and written, and GB/s over the kernel's
own time. Prints the top 15 as a table. Used by tests/gpu-check.sh; the
CSV has one row per kernel launch and metric.
"""
import csv
import json
import sys

TIME = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
        "second": 1e6, "s": 1e6}
BYTES = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
         "KB": 1e3, "MB": 1e6, "GB": 1e9}


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def short(name):
    name = name.strip()
    if name.startswith("void "):
        name = name[5:]
    depth = 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            return name[:i]
    return name


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    label = sys.argv[3] if len(sys.argv) > 3 else ""
    launches = {}  # (kernel id) -> {name, us, rd, wr}
    with open(sys.argv[1], newline="") as f:
        # ncu prints its own lines (==PROF== ...) before the table
        lines = [l for l in f if l.startswith('"')]
    for row in csv.DictReader(lines):
        kid = row.get("ID")
        metric, unit = row.get("Metric Name", ""), row.get("Metric Unit", "")
        value = number(row.get("Metric Value", ""))
        if kid is None or value is None:
            continue
        k = launches.setdefault(kid, {"name": short(row.get("Kernel Name", "?")), "us": 0.0,
                                      "rd": 0.0, "wr": 0.0})
        if metric == "gpu__time_duration.sum" and unit in TIME:
            k["us"] = value * TIME[unit]
        elif metric == "dram__bytes_read.sum" and unit in BYTES:
            k["rd"] = value * BYTES[unit]
        elif metric == "dram__bytes_write.sum" and unit in BYTES:
            k["wr"] = value * BYTES[unit]
    if not launches:
        sys.exit(f"{sys.argv[1]}: no kernel launches in it (did ncu fail?)")
    groups = {}
    for k in launches.values():
        g = groups.setdefault(k["name"], {"name": k["name"], "launches": 0, "total_us": 0.0,
                                          "dram_read_bytes": 0.0, "dram_write_bytes": 0.0})
        g["launches"] += 1
        g["total_us"] += k["us"]
        g["dram_read_bytes"] += k["rd"]
        g["dram_write_bytes"] += k["wr"]
    out = sorted(groups.values(), key=lambda g: -g["total_us"])
    total = sum(g["total_us"] for g in out)
    for g in out:
        g["mean_us"] = g["total_us"] / g["launches"]
        moved = g["dram_read_bytes"] + g["dram_write_bytes"]
        g["gbps"] = moved / (g["total_us"] * 1e3) if g["total_us"] > 0 else 0.0
        g["share"] = g["total_us"] / total if total > 0 else 0.0
    with open(sys.argv[2], "w") as f:
        json.dump({"label": label, "launches": len(launches), "total_us": total, "kernels": out},
                  f, indent=1)
    print(f"{label}: {len(launches)} launches, {total / 1e3:.2f} ms of kernel time")
    print(f"  {'kernel':48s} {'n':>5s} {'mean us':>9s} {'share':>6s} {'GB/s':>7s}")
    for g in out[:15]:
        print(f"  {g['name'][:48]:48s} {g['launches']:5d} {g['mean_us']:9.2f} "
              f"{100 * g['share']:5.1f}% {g['gbps']:7.0f}")


if __name__ == "__main__":
    main()
