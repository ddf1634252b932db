"""libddp's reducer against PyTorch's DistributedDataParallel, same wheel,
same model, weights and data, 2 real processes, 50 SGD steps."""
import pytest

from parity_launch import run_ranks


@pytest.mark.parametrize("model", ["mlp", "conv", "unused"])
def test_parameters_equal_pytorch_ddp_bitwise(model):
    codes, report = run_ranks("ddp_parity_worker.py", 2, {"MODEL": model})
    assert codes == [0, 0], report
    assert report.count(" 0 mismatches") == 2, report


@pytest.mark.parametrize("hook", ["allreduce", "fp16", "bf16", "fp16_wrap", "bf16_wrap", "noop"])
def test_comm_hooks_equal_pytorchs_own_hooks_bitwise(hook):
    codes, report = run_ranks("ddp_parity_worker.py", 2, {"MODEL": "mlp", "HOOK": hook})
    assert codes == [0, 0], report
    assert report.count(" 0 mismatches") == 2, report
