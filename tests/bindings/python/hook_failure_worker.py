"""A Python comm hook that raises on rank 1: the step fails on both ranks
with a libddp.Error (rank 0's names rank 1), none hangs. Rank 0 returns
what each saw."""
import json
import sys

import numpy as np

import libddp


def work(worker, arg):
    with libddp.Group() as g:
        def hook(group, bucket):
            if group.rank() == 1:
                raise libddp.Error(libddp.E_INVALID_ARGUMENT, "this hook refuses bucket %d" % bucket.index)
            group.all_reduce(bucket.buffer, libddp.SUM)

        r = libddp.reducer(g, [np.ones(3, np.float32)])
        r.set_comm_hook(libddp.CommHook.custom(hook))
        try:
            r.mark_ready(0)
            r.finish()
            seen = None
        except libddp.Error as e:
            seen = [e.status, e.message]
        if g.rank() == 0:
            worker.set_result(json.dumps({"rank0": seen}).encode())
        else:
            print(json.dumps({"rank1": seen}), flush=True)
    return 0


if __name__ == "__main__":
    print(libddp.spawn(work, 2, b"", timeout_ms=60000).decode())
