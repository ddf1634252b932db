"""libddp's reducer with static_graph against PyTorch's
DistributedDataParallel(static_graph=True), same wheel, model, weights and
data, 2 real processes: the buckets each parameter is reduced in and the
gradients at steps 1, 2, 3 and 10 (the buckets are rebuilt after step 2 in
the order gradients became ready), and a graph that changes afterwards is an
error naming the gradient on every rank."""
import re

import pytest

from parity_launch import run_ranks


def test_buckets_and_gradients_equal_pytorch_static_graph():
    codes, report = run_ranks("static_graph_parity_worker.py", 2)
    assert codes == [0, 0], report
    assert report.count(" 0 mismatches") == 2, report


# "used": the unused layer's weight (2) or bias (3), whichever's hook fires first.
@pytest.mark.parametrize("change,named", [("used", r"gradient [23] was marked ready in this step but never in the first"),
                                          ("unused", r"gradients 6, 7 were used in the first step but not")])
def test_a_graph_that_changes_is_an_error_on_every_rank(change, named):
    codes, report = run_ranks("static_graph_parity_worker.py", 2, {"CHANGE": change}, timeout=120)
    assert codes == [0, 0], report
    for r in (0, 1):
        line = next(l for l in report.splitlines() if l.startswith(f"[rank {r}] CHANGE="))
        assert re.search(named, line), report
