"""Machine profiles: what a collective and a local kernel cost, for the time model of `gridgnn.cost`.

A collective of ``p`` processes that moves ``b`` bytes to a rank (the byte convention of
`gridgnn.grid.comm`) costs that rank ``α · ⌈log2 p⌉ + β · b`` seconds, with α (latency per step) and
β (seconds per byte, the inverse bandwidth) per operation, and per link class: within a node or across
nodes (a group is *within a node* when all its ranks sit on one node; ranks fill nodes in order,
``procs_per_node`` at a time). Local work costs ``flops / rate``: sparse products (2 flops per stored
entry per dense column) at ``sparse_flops``, dense products at ``dense_flops``, element-wise work (dropout
hashing, ReLU, bias, softmax) at ``elementwise_per_s`` elements per second.

Profiles come from three places: `PRESETS` (documented, with sources), a JSON file written by
``gridgnn calibrate`` (measured on the spot), or a dict (`MachineProfile.from_dict`). Pure code.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gridgnn.errors import ConfigError
from gridgnn.safe_files import atomic_write

OPS = ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter")


@dataclass(frozen=True)
class LinkCost:
    """Latency per step ``alpha_s`` (seconds) and inverse bandwidth ``beta_s_per_byte``."""

    alpha_s: float
    beta_s_per_byte: float

    def time(self, group_size: int, calls, nbytes):
        """Seconds for ``calls`` collectives on ``group_size`` processes moving ``nbytes`` in all."""
        steps = math.ceil(math.log2(group_size)) if group_size > 1 else 0
        return calls * self.alpha_s * steps + nbytes * self.beta_s_per_byte


@dataclass
class MachineProfile:
    """Costs of collectives (per operation, within and across nodes) and of local kernels."""

    name: str
    description: str
    intra_node: dict[str, LinkCost]
    inter_node: dict[str, LinkCost] | None = None
    procs_per_node: int | None = None  # None: every process on one node
    sparse_flops: float = 1e9
    dense_flops: float = 1e10
    elementwise_per_s: float = 1e9
    memory_per_proc_bytes: int | None = None
    sources: list[str] = field(default_factory=list)
    device: str = "cpu"
    """Where training holds its tensors on this machine (``cpu``, ``cuda``): on ``cpu`` sparse input features
    stay sparse, elsewhere they are made dense (`gridgnn.train.loop.trainer.model_input`), which the memory and
    compute models follow (`gridgnn.cost.memory_model.sparse_features`). A file without it: ``cpu``."""

    def link(self, op: str, inter: bool) -> LinkCost:
        table = self.inter_node if inter and self.inter_node else self.intra_node
        return table.get(op) or table["broadcast"]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> MachineProfile:
        """Inverse of `to_dict` (the JSON file format of ``gridgnn calibrate``); ValueError naming the first
        field that breaks the schema (`check_profile_dict`)."""
        check_profile_dict(data)
        data = dict(data)
        for key in ("intra_node", "inter_node"):
            if data.get(key) is not None:
                data[key] = {op: LinkCost(**cost) for op, cost in data[key].items()}
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    def save(self, path: str | Path) -> None:
        """Write the profile as JSON atomically, never through a link (`gridgnn.safe_files.atomic_write`)."""
        with atomic_write(path, "machine profile") as stream:
            stream.write((json.dumps(self.to_dict(), indent=1) + "\n").encode("utf-8"))


_RATES = ("sparse_flops", "dense_flops", "elementwise_per_s")


def _positive(value: object, *, integer: bool = False, zero: bool = False) -> bool:
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        return False
    return math.isfinite(value) and (value >= 0 if zero else value > 0)


def check_profile_dict(data: object) -> None:
    """The schema of a profile file: ``name`` a string; ``intra_node`` (and ``inter_node`` unless null) an
    object of operations from `OPS` that holds at least ``broadcast`` (the fallback of the others), each
    ``{"alpha_s", "beta_s_per_byte"}`` finite numbers >= 0; the rates finite and positive;
    ``procs_per_node`` and ``memory_per_proc_bytes`` positive integers or null; ``device`` (optional) a
    non-empty string. ValueError otherwise."""
    if not isinstance(data, dict):
        raise ValueError("a profile is a JSON object")
    if not isinstance(data.get("name"), str) or not isinstance(data.get("description", ""), str):
        raise ValueError("'name' and 'description' must be strings")
    for key in ("intra_node", "inter_node"):
        table = data.get(key)
        if table is None and key == "inter_node":
            continue
        if not isinstance(table, dict) or "broadcast" not in table:
            raise ValueError(f"'{key}' must be an object with at least a 'broadcast' entry")
        for op, cost in table.items():
            if op not in OPS or not isinstance(cost, dict) or set(cost) != {"alpha_s", "beta_s_per_byte"} \
                    or not all(_positive(v, zero=True) for v in cost.values()):
                raise ValueError(f"'{key}' entry {op!r} must be one of {', '.join(OPS)} with finite numbers "
                                 "alpha_s and beta_s_per_byte >= 0")
    for key in _RATES:
        if key in data and not _positive(data[key]):
            raise ValueError(f"'{key}' must be a finite positive number, got {data[key]!r}")
    for key in ("procs_per_node", "memory_per_proc_bytes"):
        if data.get(key) is not None and not _positive(data[key], integer=True):
            raise ValueError(f"'{key}' must be a positive integer or null, got {data[key]!r}")
    if not isinstance(data.get("device", "cpu"), str) or not data.get("device", "cpu"):
        raise ValueError(f"'device' must be a device type such as 'cpu' or 'cuda', got {data.get('device')!r}")
    sources = data.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(item, str) for item in sources):
        raise ValueError("'sources' must be a list of strings")


def _uniform(alpha: float, bandwidth: float) -> dict[str, LinkCost]:
    return {op: LinkCost(alpha, 1.0 / bandwidth) for op in OPS}


GPU_CLUSTER = MachineProfile(
    name="gpu-cluster",
    description="DGX H100-class nodes: 8 GPUs per node on NVLink 4 / NVSwitch, one 400 Gb/s InfiniBand NDR "
                "adapter per GPU between nodes, 80 GB per GPU",
    # NVLink 4: 900 GB/s per GPU both directions = 450 GB/s each way; 80 % of it reachable by NCCL.
    intra_node=_uniform(5e-6, 0.8 * 450e9),
    # NDR InfiniBand: 400 Gb/s = 50 GB/s per GPU and direction; 80 % of it.
    inter_node=_uniform(20e-6, 0.8 * 50e9),
    procs_per_node=8,
    # cuSPARSE SpMM on graphs is bandwidth-bound: ~8 bytes of Â plus a gathered 4-byte row element per 2
    # flops; at 3.35 TB/s HBM3 and ~30 % efficiency on irregular rows this is ~250 Gflop/s.
    sparse_flops=2.5e11,
    # 67 Tflop/s FP32 (non-tensor-core) peak of an H100 SXM; ~50 % on the skinny GEMMs of a GCN.
    dense_flops=3.3e13,
    # Element-wise kernels stream ~12 bytes per element at ~2.5 TB/s effective.
    elementwise_per_s=2e11,
    memory_per_proc_bytes=80 * 1024**3,
    sources=[
        "NVIDIA H100 Tensor Core GPU datasheet (SXM5: FP32 67 TFLOPS, HBM3 3.35 TB/s, NVLink 900 GB/s, 80 GB)",
        "NVIDIA DGX H100 datasheet (8 H100 per node on NVSwitch; 8 ConnectX-7 400 Gb/s InfiniBand NDR ports)",
        "NCCL src/graph/tuning.cc latency tables (Ring/Simple base latency 8.4 us, NVLink step 3.4 us): "
        "alpha 5 us per tree step within a node",
        "aws-ofi-nccl tuner NET_LATENCY = 20 us: alpha across nodes",
    ],
    device="cuda",
)

CPU_GLOO_LOOPBACK = MachineProfile(
    name="cpu-loopback",
    description="processes of one CPU machine on gloo over loopback TCP (rough defaults; run "
                "'gridgnn calibrate' to measure the machine at hand)",
    intra_node=_uniform(5e-5, 1e9),
    sparse_flops=5e8,
    dense_flops=5e9,
    elementwise_per_s=1e8,
    sources=["order-of-magnitude defaults; replace by a calibrated profile"],
)

PRESETS: dict[str, MachineProfile] = {p.name: p for p in (GPU_CLUSTER, CPU_GLOO_LOOPBACK)}


PROFILE_DIR = Path(__file__).parent / "profiles"
"""Measured profiles shipped with gridgnn (``<name>.json``, written by ``gridgnn calibrate``)."""


def profile_names() -> list[str]:
    """Preset names and the names of the shipped measured profiles."""
    return list(PRESETS) + sorted(p.stem for p in PROFILE_DIR.glob("*.json"))


def load_profile(name_or_path: str | Path) -> MachineProfile:
    """A preset by name (`PRESETS`), a shipped measured profile by name (`PROFILE_DIR`), or a profile JSON
    file (e.g. written by ``gridgnn calibrate``)."""
    key = str(name_or_path)
    if key in PRESETS:
        return PRESETS[key]
    path = PROFILE_DIR / f"{key}.json" if (PROFILE_DIR / f"{key}.json").is_file() else Path(key)
    if not path.is_file():
        raise ConfigError(f"no profile '{key}': not one of {', '.join(profile_names())} nor a file")
    try:
        return MachineProfile.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, TypeError, KeyError, RecursionError, UnicodeDecodeError) as exc:
        raise ConfigError(f"profile file '{path}' is not a gridgnn profile: {exc}") from None


def default_profile(device_type: str) -> MachineProfile:
    """The profile to plan with when none is given: `GPU_CLUSTER` for ``"cuda"``, else the measured
    ``cpu-local`` profile shipped in `PROFILE_DIR` (or `CPU_GLOO_LOOPBACK` when it is absent)."""
    if device_type == "cuda":
        return GPU_CLUSTER
    shipped = PROFILE_DIR / "cpu-local.json"
    return load_profile(shipped) if shipped.is_file() else CPU_GLOO_LOOPBACK
