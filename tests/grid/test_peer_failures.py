"""Control collectives outside `Communicator` end with the one-line `CollectiveError` when a peer is lost."""

from __future__ import annotations

import pytest
import torch.distributed as dist

from gridgnn.errors import CollectiveError
from gridgnn.grid.peer_failures import is_peer_failure, peer_failures_explained
from gridgnn.train.run import grid_train

GLOO_TIMEOUT = RuntimeError("[../gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 5000ms for recv "
                            "operation to complete")


def _two_ranks(monkeypatch, gather) -> None:
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    monkeypatch.setattr(dist, "get_rank", lambda: 0)
    monkeypatch.setattr(dist, "gather_object", gather)


def _raise(error: BaseException):
    def call(*_args, **_kwargs):
        raise error
    return call


def test_a_gather_timeout_is_a_collective_error_naming_what_failed(monkeypatch):
    # found by tests/launch/test_lost_worker.py: rank 0 timed out gathering metrics for a checkpoint and ended with
    # a traceback and status 1 before the launcher could name the stopped worker
    _two_ranks(monkeypatch, _raise(GLOO_TIMEOUT))
    with pytest.raises(CollectiveError, match=r"gathering to rank 0 \(rank 0\) failed: another worker stopped or "
                                              r"did not answer in time \(.*Timed out waiting 5000ms"):
        grid_train.gather_to_rank0({"epoch": 1})


def test_other_errors_pass_unchanged(monkeypatch):
    memory = RuntimeError("DefaultCPUAllocator: can't allocate memory")
    _two_ranks(monkeypatch, _raise(memory))
    with pytest.raises(RuntimeError) as info:
        grid_train.gather_to_rank0({"epoch": 1})
    assert info.value is memory
    with pytest.raises(ValueError), peer_failures_explained("x"):
        raise ValueError("not a peer")
    already = CollectiveError("broadcast on axis 'row' failed")
    with pytest.raises(CollectiveError) as info, peer_failures_explained("x"):
        raise already
    assert info.value is already


@pytest.mark.parametrize(("error", "peer"), [
    (GLOO_TIMEOUT, True), (dist.DistBackendError("NCCL communicator was aborted"), True),
    (RuntimeError("Connection closed by peer [127.0.0.1]:4242"), True),
    (RuntimeError("DefaultCPUAllocator: can't allocate memory"), False), (OSError("timed out"), False),
])
def test_peer_failures_are_told_from_other_errors(error, peer):
    assert is_peer_failure(error) is peer


def test_every_peer_failure_line_is_built_alike_and_keeps_its_text(monkeypatch, capsys):
    """One formatter (`gridgnn.peer_errors.peer_failure_text`) behind the counted collectives, the control
    collectives, checkpoint steps, the torchrun line and the launcher's report; the texts are pinned."""
    import io
    from pathlib import Path
    from types import SimpleNamespace

    from gridgnn.grid.comm import Communicator
    from gridgnn.launch.local import EXIT_PEER_FAILED, _report
    from gridgnn.peer_errors import collective_error_line
    from gridgnn.train.checkpoint.errors import failures_explained

    told = "Timed out waiting 5000ms for recv operation to complete"
    peer = "another worker stopped or did not answer"
    lost = Communicator(SimpleNamespace(rank=3)).lost_peer("broadcast", "row", GLOO_TIMEOUT)
    assert str(lost) == f"broadcast on axis 'row' (rank 3) failed: {peer} in time ({told})"
    with pytest.raises(CollectiveError) as info, peer_failures_explained("the barrier after set-up"):
        raise GLOO_TIMEOUT
    assert str(info.value) == f"the barrier after set-up failed: {peer} in time ({told})"
    with pytest.raises(CollectiveError) as info, failures_explained("saving checkpoint", Path("/ck/epoch-00000002")):
        raise GLOO_TIMEOUT
    assert str(info.value) == (f"saving checkpoint '/ck/epoch-00000002' failed: {peer} in time (RuntimeError: "
                               f"[../gloo/transport/tcp/unbound_buffer.cc:78] {told})")
    monkeypatch.setenv("RANK", "0")
    assert collective_error_line(RuntimeError(f"\n  {GLOO_TIMEOUT}\nsecond line")) == told
    assert collective_error_line(RuntimeError("  \n")) == "RuntimeError"
    capsys.readouterr()
    _report(1, EXIT_PEER_FAILED, io.StringIO(""), [])
    assert capsys.readouterr().err == (f"gridgnn: error: worker rank 1 lost contact with another worker (a collective "
                                       f"failed: {peer}); stopping the other workers\n")
