#!/usr/bin/env bash
# The package as a user installs it: builds the sdist and the wheel (python -m build: the wheel is built from
# the unpacked sdist, so both are checked), checks that the wheel holds every tracked file of gridgnn/ (the
# modules, the shipped profiles in gridgnn/cost/profiles/) and the `gridgnn` entry point, installs it into a
# fresh virtual environment and, from a folder outside the repository, runs the installed command:
# --version, a 5-epoch training, a 2-process run, a plan with the shipped profile, and a report when
# matplotlib is there. The environment sees the system's packages (--system-site-packages), so torch, numpy
# and scipy are not downloaded again; the script checks that gridgnn itself comes from the environment.
# Usage: bash scripts/wheel_check.sh   (from anywhere; needs `build`, in the test extra)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/gridgnn-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT
unset PYTHONPATH  # the installed package, not a checkout, must answer
start=$SECONDS

echo "== build (sdist, then the wheel from it)"
# from a copy of the files git knows (tracked, and untracked ones not ignored): the build writes its egg-info
# beside the sources, and nothing ignored (a local build/, a .venv) may slip into the sdist
mkdir "$work/src"
git -C "$repo" ls-files -z --cached --others --exclude-standard \
    | (cd "$repo" && tar --null --ignore-failed-read -T - -cf -) | tar -xf - -C "$work/src"
python -m build --outdir "$work/dist" "$work/src" >"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
ls "$work/dist"
wheel="$(ls "$work/dist"/gridgnn-*.whl)"

echo "== wheel contents"
python - "$wheel" "$repo" <<'PY'
import subprocess, sys, zipfile
wheel, repo = sys.argv[1:]
names = set(zipfile.ZipFile(wheel).namelist())
tracked = subprocess.run(["git", "-C", repo, "ls-files", "gridgnn"], capture_output=True, text=True,
                         check=True).stdout.split()
missing = [path for path in tracked if path not in names]
assert not missing, f"tracked files missing from the wheel: {missing}"
assert any(n.startswith("gridgnn/cost/profiles/") and n.endswith(".json") for n in names), "no shipped profile"
entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
assert "gridgnn = gridgnn.cli.main:run" in zipfile.ZipFile(wheel).read(entry).decode(), "no gridgnn entry point"
print(f"{len(tracked)} tracked files of gridgnn/ all in {wheel.rsplit('/', 1)[-1]}, entry point gridgnn")
PY

echo "== fresh virtual environment"
python -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel"
cd "$work"  # nothing of the repository on sys.path
gridgnn="$work/venv/bin/gridgnn"
"$work/venv/bin/python" - "$work/venv" <<'PY'
import sys, gridgnn
from gridgnn.cost.profile import load_profile
assert gridgnn.__file__.startswith(sys.argv[1]), f"gridgnn imported from {gridgnn.__file__}, not the wheel"
load_profile("cpu-local")  # the shipped profile, by name
print("gridgnn", gridgnn.__version__, "from", gridgnn.__file__)
PY

echo "== the installed command"
"$gridgnn" --version
"$gridgnn" train --epochs 5 --metrics-out "$work/one.json"
"$gridgnn" train --epochs 5 --dataset csbm:nodes=500 --nprocs 2 --algo 1d --threads 1 --metrics-out "$work/two.json"
"$gridgnn" plan --dataset csbm:nodes=500 --nprocs 4 --profile cpu-local | tail -3
if "$work/venv/bin/python" -c "import matplotlib" 2>/dev/null; then
    "$gridgnn" report "$work/two.json" --out "$work/two.html"
fi
echo "wheel check: passed in $((SECONDS - start)) s"
