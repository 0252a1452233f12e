"""What a process holds before any data: the Python interpreter, torch and gridgnn's training stack.

The memory model (`gridgnn.cost.memory_model`) prices the algorithm's working set; every process also
carries this baseline, which the memory guard and ``gridgnn plan``'s memory column add to it. Bytes per
device kind, measured with ``scripts/measure_process_baseline.py``: the resident set (psutil RSS) of a fresh
process that has imported torch and gridgnn's training stack, run one autograd step and joined a one-process
gloo group, rounded up to a MiB. CPU: 259 MiB with torch 2.13 (CPU build) on the project's 2-core Linux
machine, 260 MiB kept. CUDA: the guard compares device memory, and this process's CUDA context is already
out of the free device memory it reads; the context's share on the device is not measured yet (no GPU in the
session that added this), so 0 is counted there.
"""

from __future__ import annotations

MiB = 2**20
PROCESS_BASELINE_BYTES = {"cpu": 260 * MiB, "cuda": 0}
"""Device kind -> bytes each process holds before any data (see the module docstring)."""


def process_baseline(device: str) -> int:
    """The baseline bytes of a process training on ``device`` (``cpu``, ``cuda``; 0 for other kinds)."""
    return PROCESS_BASELINE_BYTES.get(device, 0)


def baseline_note(device: str) -> str:
    """One phrase for the output: what the baseline counts on ``device``."""
    baseline = process_baseline(device)
    if baseline == 0:
        return f"no baseline counted for {device} (the process's own share is not measured there)"
    return f"{baseline // MiB} MiB per process for Python and torch (measured on {device})"
