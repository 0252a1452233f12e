"""Are two metrics files of the same run equal but for times, memory figures and paths? (issue 14's check
that a refactor changes no number: losses, accuracies, byte counts, predictions, the auto choice and reason).

    python benchmarks/same_metrics.py BEFORE.json AFTER.json     # prints the differences; exit 1 if any
"""

from __future__ import annotations

import json
import sys

IGNORED = ("metrics_out", "checkpoint_dir", "threads")
"""Keys whose values differ between runs of the same configuration (besides times and memory)."""


def ignored(key: str) -> bool:
    """True for keys of wall-clock times, memory figures and output paths."""
    return (key.endswith(("_s", "_seconds")) or "time" in key or "memory" in key or "rss" in key
            or key in IGNORED)


def differences(before: object, after: object, where: str = "") -> list[str]:
    """Every path where ``before`` and ``after`` differ (ignored keys left out), one line each."""
    if isinstance(before, dict) and isinstance(after, dict):
        found = []
        for key in sorted(set(before) | set(after)):
            if ignored(key):
                continue
            if key not in before or key not in after:
                found.append(f"{where}.{key}: only in {'before' if key in before else 'after'}")
            else:
                found += differences(before[key], after[key], f"{where}.{key}")
        return found
    if isinstance(before, list) and isinstance(after, list):
        found = [f"{where}: {len(before)} vs {len(after)} items"] if len(before) != len(after) else []
        for index, (one, two) in enumerate(zip(before, after, strict=False)):  # a length gap is reported above
            found += differences(one, two, f"{where}[{index}]")
        return found
    return [] if before == after else [f"{where}: {before!r} vs {after!r}"]


def main(argv: list[str]) -> int:
    with open(argv[0], encoding="utf-8") as one, open(argv[1], encoding="utf-8") as two:
        found = differences(json.load(one), json.load(two))
    print(f"{argv[0]} vs {argv[1]}: {len(found)} differences (times, memory and paths ignored)")
    for line in found:
        print("  " + line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
