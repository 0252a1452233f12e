"""Compare two files of `benchmarks/price_snapshot.py`: integers (bytes, calls, memory) must be equal, seconds
within 1e-12 relative (the sum of the same terms in another order). Prints the differences; exit 1 if any.

    python benchmarks/same_prices.py BEFORE.json AFTER.json
"""

from __future__ import annotations

import json
import sys


def differences(before: object, after: object, where: str) -> tuple[list[str], float]:
    """Every path where ``before`` and ``after`` differ, and the worst relative difference of two floats."""
    if isinstance(before, dict):
        if before.keys() != after.keys():
            return [f"{where}: keys {sorted(before)} vs {sorted(after)}"], 0.0
        found, worst = [], 0.0
        for key in before:
            more, rel = differences(before[key], after[key], f"{where}/{key}")
            found, worst = found + more, max(worst, rel)
        return found, worst
    if isinstance(before, list):
        if len(before) != len(after):
            return [f"{where}: {len(before)} vs {len(after)} values"], 0.0
        found, worst = [], 0.0
        for x, y in zip(before, after, strict=True):
            more, rel = differences(x, y, where)
            found, worst = found + more, max(worst, rel)
        return found, worst
    if isinstance(before, int) and isinstance(after, int) or before is None or after is None:
        return ([] if before == after else [f"{where}: {before} vs {after}"]), 0.0
    rel = abs(before - after) / max(abs(before), abs(after), 1e-300)
    return ([] if rel <= 1e-12 else [f"{where}: {before} vs {after}"]), rel


def main(before_path: str, after_path: str) -> int:
    with open(before_path, encoding="utf-8") as f:
        before = json.load(f)
    with open(after_path, encoding="utf-8") as f:
        after = json.load(f)
    if before.keys() != after.keys():
        print(f"different configurations: {len(before)} vs {len(after)}")
        return 1
    found, worst = [], 0.0
    for key in before:
        more, rel = differences(before[key], after[key], key)
        found, worst = found + more, max(worst, rel)
    for line in found[:20]:
        print(line)
    print(f"{len(before)} configurations; {len(found)} differences; worst relative difference of a float {worst:.3g}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
