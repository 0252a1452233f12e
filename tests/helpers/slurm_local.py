"""Test helper: a one-machine Slurm cluster (Debian's slurm-wlm) in a temporary folder, for the slow test of
``scripts/slurm_train.sbatch``.

`LocalSlurm(folder)` writes a ``slurm.conf`` (one node ``localhost`` at 127.0.0.1, free ports, every file in
``folder``), starts ``munged``, ``slurmctld`` and ``slurmd`` there, and stops exactly those three (by their pid
files) on leaving the ``with`` block. Commands see it through ``SLURM_CONF`` (`env`). Root only.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from gridgnn.launch.spawn import free_port

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue")


def slurm_unavailable() -> str | None:
    missing = [tool for tool in DAEMONS if shutil.which(tool) is None]
    if missing:
        return f"Slurm is not installed (no {', '.join(missing)}; Debian: apt-get install slurm-wlm)"
    if os.geteuid() != 0:
        return "the one-machine Slurm cluster runs its daemons as root"
    return None


class LocalSlurm:
    def __init__(self, folder: Path, cpus: int = 2):
        self.folder, self.cpus = Path(folder), cpus
        self.conf = self.folder / "slurm.conf"

    def env(self, **extra: str) -> dict[str, str]:
        return dict(os.environ, SLURM_CONF=str(self.conf), **extra)

    def __enter__(self) -> LocalSlurm:
        for sub in ("spool", "state", "run"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        key = self.folder / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.conf.write_text(self._config())
        try:
            f = self.folder
            subprocess.run(["munged", f"--socket={f / 'munge.sock'}", f"--key-file={key}", "--force",
                            f"--pid-file={f / 'run' / 'munged.pid'}", f"--log-file={f / 'munged.log'}",
                            f"--seed-file={f / 'munge.seed'}"], check=True, capture_output=True, timeout=30)
            subprocess.run(["slurmctld"], env=self.env(), check=True, capture_output=True, timeout=30)
            subprocess.run(["slurmd", "-N", "localhost"], env=self.env(), check=True, capture_output=True,
                           timeout=30)
            self._wait_idle(60)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _config(self) -> str:
        f = self.folder
        return "\n".join([
            "ClusterName=gridgnntest", "SlurmctldHost=localhost(127.0.0.1)", "SlurmUser=root",
            "AuthType=auth/munge", f"AuthInfo=socket={f / 'munge.sock'}", "CredType=cred/munge",
            f"StateSaveLocation={f / 'state'}", f"SlurmdSpoolDir={f / 'spool'}",
            f"SlurmctldPidFile={f / 'run' / 'slurmctld.pid'}", f"SlurmdPidFile={f / 'run' / 'slurmd.pid'}",
            f"SlurmctldLogFile={f / 'slurmctld.log'}", f"SlurmdLogFile={f / 'slurmd.log'}",
            f"SlurmctldPort={free_port()}", f"SlurmdPort={free_port()}", "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none", "SelectType=select/cons_tres", "SchedulerType=sched/builtin",
            "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
            "ReturnToService=2", "MpiDefault=none",
            f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory=1000 State=UNKNOWN",
            "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP", ""])

    def _wait_idle(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            out = subprocess.run(["sinfo", "-h", "-o", "%t"], env=self.env(), capture_output=True, text=True)
            if out.stdout.strip() == "idle":
                return
            time.sleep(0.5)
        raise RuntimeError(f"the one-machine Slurm cluster did not come up: {out.stdout} {out.stderr}")

    def job_state(self, job_id: str) -> str:
        out = subprocess.run(["scontrol", "show", "job", job_id], env=self.env(), capture_output=True, text=True)
        fields = dict(item.split("=", 1) for item in out.stdout.split() if "=" in item)
        return fields.get("JobState", "UNKNOWN")

    def close(self) -> None:
        subprocess.run(["scancel", "--full", "--user", "root"], env=self.env(), capture_output=True, timeout=30)
        for name in ("slurmd", "slurmctld", "munged"):
            pid_file = self.folder / "run" / f"{name}.pid"
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                continue
        time.sleep(1)
