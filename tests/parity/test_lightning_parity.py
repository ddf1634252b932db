"""libddp's collectives against Lightning's own implementations, run from
the same torch wheel on the same inputs, on 2 and 4 real processes."""
import pytest

from parity_launch import run_ranks


@pytest.mark.parametrize("world", [2, 4])
def test_sync_ddp_and_gather_all_tensors_match_lightning(world):
    codes, report = run_ranks("lightning_parity_worker.py", world)
    assert codes == [0] * world, report
    assert report.count(" 0 mismatches") == world, report
