"""libddp's all_gather with sync_grads (ddp_strategy_all_gather_v2, through
tests/torch/torch_worker.cpp's gather_grads mode) against PyTorch's
torch.distributed.nn.functional.all_gather, same wheel, same inputs, targets
and loss: each rank's input gradient. Bitwise on 2 ranks; on 4 the ranks'
sums may be added in another order (PyTorch's gloo backward is an
all-to-all and a local sum), so to float32 precision."""
import os
import subprocess
import sys

import numpy as np
import pytest

from parity_launch import free_port, run_ranks


def libddp_grads(world, out):
    worker = os.path.join(os.environ["DDP_BUILD"], "tests", "torch", "torch_worker")
    if not os.path.exists(worker):
        pytest.skip(f"{worker} is not built")
    port = free_port()
    procs = [subprocess.Popen([worker, "gather_grads"], env=dict(
        os.environ, RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port), GATHER_GRAD_OUT=out, OMP_NUM_THREADS="1"), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True) for r in range(world)]
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=120)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0] * world, "\n".join(outputs)


@pytest.mark.parametrize("world", [2, 4])
def test_input_gradients_equal_torch_distributed_nn_all_gather(tmp_path, world):
    ours, theirs = tmp_path / "libddp", tmp_path / "torch"
    ours.mkdir()
    theirs.mkdir()
    libddp_grads(world, str(ours))
    codes, report = run_ranks("gather_grads_parity_worker.py", world, {"OUT": str(theirs)})
    assert codes == [0] * world, report
    for r in range(world):
        a = np.fromfile(ours / f"rank{r}.f32", dtype=np.float32)
        b = np.fromfile(theirs / f"rank{r}.f32", dtype=np.float32)
        assert a.shape == b.shape == (12,)
        if world == 2:
            assert np.array_equal(a, b), (r, a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)
