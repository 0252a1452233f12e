"""``gridgnn calibrate``: measure collectives and local kernels here and write a machine profile file."""

from __future__ import annotations

import argparse

from gridgnn.errors import ConfigError


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("calibrate", help="measure this machine and write a profile for 'gridgnn plan'",
                                 description="Time collectives on local workers and the local kernels, fit "
                                             "latency and inverse bandwidth per collective, write a profile.")
    parser.add_argument("--nprocs", type=int, default=2, help="local workers for the collectives (default: 2)")
    parser.add_argument("--repeats", type=int, default=5, help="repetitions per payload (default: 5)")
    parser.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto",
                        help="collective backend (default: nccl when CUDA is present, else gloo)")
    parser.add_argument("--name", default="calibrated", help="profile name (default: %(default)s)")
    parser.add_argument("--out", default="gridgnn-profile.json", metavar="FILE",
                        help="profile file to write (default: %(default)s)")
    parser.set_defaults(handler=run_calibrate)


def run_calibrate(args: argparse.Namespace) -> int:
    """Handler of ``gridgnn calibrate``."""
    import torch

    from gridgnn.plan.calibrate import calibrate
    from gridgnn.safe_files import check_target

    if not 2 <= args.nprocs <= 16:
        raise ConfigError(f"--nprocs must be between 2 and 16, got {args.nprocs}")
    if args.repeats < 1:
        raise ConfigError(f"--repeats must be at least 1, got {args.repeats}")
    cuda = torch.cuda.is_available()
    backend = ("nccl" if cuda else "gloo") if args.backend == "auto" else args.backend
    if backend == "nccl" and (not cuda or torch.cuda.device_count() < args.nprocs):
        raise ConfigError(f"nccl needs {args.nprocs} CUDA devices, found {torch.cuda.device_count() if cuda else 0}")
    from pathlib import Path

    out = Path(args.out)
    if out.is_dir() or not out.parent.is_dir():
        raise ConfigError(f"cannot write profile '{out}': {'it is a directory' if out.is_dir() else 'no such folder'}")
    check_target(out, "profile")  # a device, FIFO or link: refused before measuring, never written through
    profile = calibrate(args.nprocs, name=args.name, repeats=args.repeats, backend=backend,
                        device="cuda" if cuda else "cpu")
    profile.save(out)
    for op, link in profile.intra_node.items():
        bandwidth = 1e-9 / max(link.beta_s_per_byte, 1e-30)
        print(f"{op:<15} alpha {1e6 * link.alpha_s:9.1f} us/step  bandwidth {bandwidth:8.3f} GB/s")
    print(f"sparse {profile.sparse_flops / 1e9:.2f} Gflop/s, dense {profile.dense_flops / 1e9:.2f} Gflop/s, "
          f"element-wise {profile.elementwise_per_s / 1e9:.3f} G/s")
    print(f"profile    {args.out}")
    return 0
