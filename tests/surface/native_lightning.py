"""native_job.cpp's run in Lightning from the same wheel: NormNet from the
same state dict as the LightningModule's `model`, Trainer(strategy="ddp",
accelerator="cpu", devices=2) over Gloo, the same rows, loss and SGD, the
Trainer's precision. Each training step takes the rows of its global_step,
as native_job does, so the data follows the step count that a checkpoint
restores. Prints the loss lines native_job prints.
    native_lightning.py OUT PRECISION --resume CKPT   Trainer.fit(ckpt_path=CKPT)
                                                       up to step 20
    native_lightning.py OUT PRECISION --save CKPT     steps 0-9, then
                                                       trainer.save_checkpoint(CKPT)"""
import os
import sys
import warnings

import pytorch_lightning as pl
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from surface_model import N, REAL, NormNet, make_data, make_latent  # noqa: E402

PER_RANK, WORLD = 8, 2
warnings.filterwarnings("ignore")  # Lightning's advice on workers and mid-epoch resumption


class Native(pl.LightningModule):
    def __init__(self, out_dir):
        super().__init__()
        self.model = NormNet()
        self.model.load_state_dict(torch.load(os.path.join(out_dir, "norm_state.pt"), weights_only=True))
        self.x, self.z = make_data()[0], make_latent()

    def training_step(self, batch, _):
        step, rank = self.global_step, self.global_rank
        rows = torch.tensor([(step * WORLD * PER_RANK + rank * PER_RANK + i) % N for i in range(PER_RANK)])
        loss = F.mse_loss(self.model(self.z[rows]).float(), self.x[rows, :REAL].contiguous())
        # One write per line: both ranks share the launcher's stdout pipe.
        os.write(1, f"rank {rank} step {step} loss {float(loss.item()).hex()}\n".encode())
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)


def main():
    out_dir, precision, mode, ckpt = sys.argv[1:5]
    torch.set_num_threads(1)
    ticks = torch.utils.data.DataLoader(range(64), batch_size=1)  # the batches' content is unused
    trainer = pl.Trainer(strategy=pl.strategies.DDPStrategy(process_group_backend="gloo"), accelerator="cpu",
                         devices=WORLD, precision=precision, max_steps=10 if mode == "--save" else 20,
                         use_distributed_sampler=False, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Native(out_dir), ticks, ckpt_path=ckpt if mode == "--resume" else None)
    if mode == "--save":
        trainer.save_checkpoint(ckpt)
    sys.stdout.flush()
    sys.stderr.flush()
    # Without interpreter finalization: destroying torch's Gloo process group
    # there can abort the process ("terminate called without an active
    # exception", seen once in a fresh-clone CI run after both ranks printed
    # every loss; see tests/parity/ddp_ctypes.py's exit_now).
    os._exit(0)


if __name__ == "__main__":
    main()
