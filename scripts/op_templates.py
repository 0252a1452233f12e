"""Write `gridgnn/plan/op_templates.json`: the built-in model kinds' layer traces as templates
(`gridgnn.nn.templates`), which `gridgnn plan` instantiates without importing torch. Run it after changing a
built-in model's forward; ``tests/plan/test_op_templates.py`` fails until the committed table is regenerated.

    python scripts/op_templates.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TARGET = Path(__file__).resolve().parent.parent / "gridgnn" / "plan" / "op_templates.json"


def render() -> str:
    """The file's text for the current models: the table as JSON, keys sorted, one item per line."""
    from gridgnn.nn.templates import layer_templates

    return json.dumps(layer_templates(), indent=1, sort_keys=True) + "\n"


if __name__ == "__main__":
    TARGET.write_text(render(), encoding="utf-8")
    print(f"wrote {TARGET}", file=sys.stderr)
