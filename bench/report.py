#!/usr/bin/env python3
"""Summarises the driver's raw timings: prints the table and writes results.json.

usage: report.py RAW.json RESULTS.json COMMAND

Case names are KIND-WORKLOAD (bare-true, bwrap-python, hutch-true, hutch-prev-true, ...); the
ratios compare hutch with each baseline on the same workload, on the median and on p99.
"""
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys


def percentile(values, p):
    """Nearest-rank percentile: the smallest value with at least p% of the runs at or below it."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def summarise(case):
    wall = case["wall_ms"]
    return {
        "median_ms": statistics.median(wall),
        "p99_ms": percentile(wall, 99),
        "min_ms": min(wall),
        "mean_ms": statistics.fmean(wall),
        "cpu_median_ms": statistics.median(case["cpu_ms"]),
    }


def git_commit(root):
    try:
        rev = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    raw_path, out_path, command = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(raw_path) as f:
        raw = json.load(f)
    cases = {c["name"]: c for c in raw["cases"]}
    summary = {name: summarise(c) for name, c in cases.items()}

    ratios = {}
    for workload in ("true", "python"):
        hutch = summary.get(f"hutch-{workload}")
        if not hutch:
            continue
        for base in ("bwrap", "bare", "hutch-prev"):
            other = summary.get(f"{base}-{workload}")
            if other:
                ratios[f"hutch/{base} {workload}"] = {
                    "median": hutch["median_ms"] / other["median_ms"],
                    "p99": hutch["p99_ms"] / other["p99_ms"],
                }

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command,
        "commit": git_commit(root),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model(),
        "runs": raw["runs"],
        "warmup": raw["warmup"],
    }

    print(f"{meta['date']}  {meta['commit']}  Linux {meta['kernel']}  {meta['cpus']} CPUs  "
          f"{meta['runs']} runs each, interleaved, after {meta['warmup']} warm-up rounds")
    print(f"{'case':<18} {'median ms':>10} {'p99 ms':>10} {'min ms':>10} {'cpu ms*':>10}")
    for name in cases:
        s = summary[name]
        print(f"{name:<18} {s['median_ms']:>10.2f} {s['p99_ms']:>10.2f} {s['min_ms']:>10.2f} "
              f"{s['cpu_median_ms']:>10.2f}")
    print("* median user+sys CPU of the command and the descendants it reaped; bwrap exits without\n"
          "  reaping its sandbox's pid 1, so the payload's CPU is missing from its rows")
    print()
    print(f"{'ratio':<24} {'median':>8} {'p99':>8}")
    for name, r in ratios.items():
        print(f"{name:<24} {r['median']:>7.2f}x {r['p99']:>7.2f}x")

    result = {"meta": meta, "summary": summary, "ratios": ratios, "cases": raw["cases"]}
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
