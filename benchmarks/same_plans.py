"""Do two `gridgnn plan --json` outputs hold the same configurations with the same figures? Entries are matched
by configuration (world size, algorithm, grid, comm, order, switches), so tied entries may stand in another order;
floats must agree within 1e-12 relative, everything else exactly, and every world size must star the same best.
Lines before the JSON (the reordering lines printed on stderr) are skipped.

    python benchmarks/same_plans.py BEFORE.json AFTER.json     # prints the differences; exit 1 if any
"""

from __future__ import annotations

import json
import sys

KEY = ("world_size", "algo", "grid", "comm", "reorder", "cache_panels", "full_feature_rows", "defer_weight_gather")


def load(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return json.loads(text[text.index("["):])


def differences(before: object, after: object, where: str, worst: list[float]) -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        if before.keys() != after.keys():
            return [f"{where}: keys differ"]
        return [d for k in before if k != "best" for d in differences(before[k], after[k], f"{where}.{k}", worst)]
    if isinstance(before, list) and isinstance(after, list):
        if len(before) != len(after):
            return [f"{where}: lengths differ"]
        return [d for x, y in zip(before, after, strict=True) for d in differences(x, y, where, worst)]
    if isinstance(before, float) or isinstance(after, float):
        rel = abs(before - after) / max(abs(before), abs(after), 1e-300)
        worst[0] = max(worst[0], rel)
        return [] if rel <= 1e-12 else [f"{where}: {before} vs {after}"]
    return [] if before == after else [f"{where}: {before} vs {after}"]


def main(before_path: str, after_path: str) -> int:
    before, after = load(before_path), load(after_path)
    by_key = [{tuple(e.get(k) for k in KEY): e for e in side} for side in (before, after)]
    if by_key[0].keys() != by_key[1].keys() or len(by_key[0]) != len(before):
        print("the two plans hold different configurations")
        return 1
    worst = [0.0]
    found = [d for key in by_key[0] for d in differences(by_key[0][key], by_key[1][key], str(key), worst)]
    best = [[tuple(e.get(k) for k in KEY) for e in side if e["best"]] for side in (before, after)]
    if best[0] != best[1]:
        found.append(f"best: {best[0]} vs {best[1]}")
    for line in found[:20]:
        print(line)
    print(f"{len(before)} entries; {len(found)} differences; worst relative difference of a float {worst[0]:.2g}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
