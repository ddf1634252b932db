"""PowerSGD and post-local SGD: libddp's hooks against PyTorch's own hooks on
the same buckets, a training run with and without error feedback, and
post-local SGD with model averaging against PyTorch's averager."""
import pytest

from parity_launch import run_ranks


@pytest.mark.parametrize("variant", ["plain", "rank2", "rank4_qr", "no_feedback", "same_shape_batches", "epsilon",
                                     "batched", "fp16_wrap"])
def test_powersgd_equals_pytorchs_hook_and_statistics(variant):
    codes, report = run_ranks("powersgd_parity_worker.py", 2, {"VARIANT": variant})
    assert codes == [0, 0], report
    assert report.count(" 0 mismatches") == 2, report


def test_a_different_seed_is_noticed():
    """Negative control: the comparison above can fail."""
    codes, report = run_ranks("powersgd_parity_worker.py", 2, {"VARIANT": "plain", "SEED_SHIFT": "1"})
    assert codes == [1, 1], report
    assert "MISMATCH step 3" in report, report


def test_training_with_error_feedback_matches_allreduce_and_without_is_worse():
    codes, report = run_ranks("powersgd_training_worker.py", 2)
    assert codes == [0, 0], report
    line = next(l for l in report.splitlines() if l.startswith("[rank 0]"))
    loss = dict(kv.split("=") for kv in line.split()[2:])
    base, ef, no_ef = float(loss["allreduce"]), float(loss["powersgd_ef"]), float(loss["powersgd_no_ef"])
    assert abs(ef - base) <= 0.02 * base, report
    assert no_ef > 1.2 * base, report  # measurably worse: typically ~3x here


def test_post_localsgd_and_averaging_equal_pytorchs_bitwise_on_two_nodes_of_two():
    codes, report = run_ranks("localsgd_parity_worker.py", 4)
    assert codes == [0, 0, 0, 0], report
    assert report.count(" 0 mismatches") == 4, report


def test_a_different_averaging_period_is_noticed():
    codes, report = run_ranks("localsgd_parity_worker.py", 4, {"PERIOD_SHIFT": "1"})
    assert codes == [1, 1, 1, 1], report
    assert "MISMATCH step" in report, report
