"""What a cluster user meets first: the interface, an unreachable rendezvous, a port that is taken.

`gridgnn netcheck` runs inside namespaced hosts (`tests/helpers/netns_cluster.py`, addresses 10.200.0.0/24 only);
the worker-side checks run on loopback. Each problem is one line ``gridgnn: error: ...`` and status 2.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from gridgnn.errors import ConfigError
from gridgnn.grid import network
from tests.helpers.netns_cluster import REPO, SCRIPT, NetnsCluster, namespaces_unavailable, worker_env

_WHY = namespaces_unavailable()


def _probe(cluster: NetnsCluster, host: int, steps: list[dict]) -> list[tuple[int, str]]:
    proc = cluster.run(host, [sys.executable, str(REPO / "tests" / "helpers" / "netcheck_probe.py"), json.dumps(steps)])
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    return [tuple(item) for item in json.loads(out.splitlines()[-1])]


def _one_error_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("gridgnn: error: ") and "Traceback" not in text, text
    return lines[0]


@pytest.mark.skipif(_WHY is not None, reason=f"multi-host tests: {_WHY}")
def test_netcheck_on_namespaced_hosts():
    port = 29411
    endpoint = ["netcheck", "--rdzv-endpoint", f"10.200.0.1:{port}", "--timeout", "2"]
    with NetnsCluster(2) as cluster:
        head = _probe(cluster, 0, [{"argv": endpoint, "listen": f"10.200.0.1:{port}"}, {"argv": endpoint}])
        cut_head = [str(SCRIPT), "cut", cluster.prefix, "0"]
        *other, cut = _probe(cluster, 1, [{"argv": endpoint}, {"argv": [*endpoint, "--interface", "nope0"]},
                                          {"argv": [*endpoint, "--interface", "lo"]},
                                          {"argv": endpoint, "before": cut_head}])
    assert head[0][0] == 2 and f"port {port} on 10.200.0.1 is taken" in _one_error_line(head[0][1])
    assert head[1][0] == 0 and "rendezvous host" in head[1][1] and "interface eth0 (10.200.0.1)" in head[1][1]
    assert other[0][0] == 0 and f"reaches 10.200.0.1:{port}; interface eth0 (10.200.0.2)" in other[0][1]
    assert other[1][0] == 2 and "--interface nope0: no network interface" in _one_error_line(other[1][1])
    assert "(interfaces here: eth0, lo)" in other[1][1]
    # gloo would talk from 127.0.0.1, which host 0 cannot reach
    line = _one_error_line(other[2][1])
    assert other[2][0] == 2 and "unreachable from host" in line and "from 127.0.0.1" in line
    assert cut[0] == 2 and f"10.200.0.1:{port} is unreachable" in _one_error_line(cut[1])


def test_a_job_across_hosts_with_a_loopback_rendezvous_is_refused(monkeypatch):
    for key, value in {"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}.items():
        monkeypatch.setenv(key, value)
    for key in ("GLOO_SOCKET_IFNAME", network.INTERFACE_ENV):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(ConfigError, match="is a loopback address but the job spans hosts.*--local-addr"):
        network.choose_interface()
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")  # one host: nothing to choose
    assert network.choose_interface() is None
    assert network.choose_interface("lo") == "lo" and os.environ["GLOO_SOCKET_IFNAME"] == "lo"


@pytest.mark.slow  # ~6 s; the default suite checks a taken port through netcheck above
def test_a_worker_whose_rendezvous_port_is_taken_says_so_in_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = worker_env(RANK="0", WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                         MASTER_PORT=str(port))
        proc = subprocess.run([sys.executable, "-m", "gridgnn", "train", "--dataset", "csbm:nodes=100", "--algo",
                               "1d", "--epochs", "1", "--timeout", "20"], env=env, capture_output=True, text=True,
                              timeout=120, cwd=REPO)
    assert proc.returncode == 2
    assert f"port {port} on 127.0.0.1 is taken by another process" in _one_error_line(proc.stderr)
