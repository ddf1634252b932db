"""Lightning's Trainer(strategy="ddp", accelerator="cpu", devices=2) on the
same model and data; the step time is taken around each training batch
(forward, backward with DDP's reduction, optimizer step) on rank 0.
usage: bench_ddp_step_lightning.py <mlp|conv> [steps]"""
import json
import os
import sys
import time
import warnings

import torch
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ddp_models import make  # noqa: E402

import pytorch_lightning as pl  # noqa: E402

warnings.filterwarnings("ignore")
name = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
torch.set_num_threads(1)


class Module(pl.LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.model, _ = make(name)
        self.loss = torch.nn.CrossEntropyLoss()

    def training_step(self, batch, _):
        x, y = batch
        return self.loss(self.model(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Timer(pl.Callback):
    """A step is from one batch's start to the next one's: the training step,
    backward with DDP's reduction, the optimizer step and Lightning's own loop
    work between batches. A barrier starts every step, as in the other runs."""

    def __init__(self):
        self.ms = []
        self.t0 = None

    def on_train_batch_start(self, trainer, *_):
        if self.t0 is not None:
            self.ms.append((time.perf_counter() - self.t0) * 1e3)
        torch.distributed.barrier()
        self.t0 = time.perf_counter()


_, shape = make(name)
n = shape[0] * (steps + 3)
data = TensorDataset(torch.randn((n,) + tuple(shape[1:])), torch.randint(0, 10, (n,)))
timer = Timer()
trainer = pl.Trainer(strategy="ddp", accelerator="cpu", devices=2, max_steps=steps + 3, logger=False,
                     enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                     callbacks=[timer])
trainer.fit(Module(), DataLoader(data, batch_size=shape[0]))
if trainer.global_rank == 0:
    ms = sorted(timer.ms[2:])
    print(json.dumps({"impl": "lightning-trainer", "model": name, "bucket_cap_mb": 25, "mode": "overlap",
                      "step_ms_p50": round(ms[len(ms) // 2], 2), "step_ms_p90": round(ms[len(ms) * 9 // 10], 2)}),
          flush=True)
