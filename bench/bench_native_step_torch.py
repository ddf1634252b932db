"""bench_native_step.cpp's models and step in PyTorch DDP from Python, one
rank (env from the launcher: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT):
rank 0 prints one JSON line.
    bench_native_step_torch.py <mnist|digits> [steps]"""
import json
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F


class MnistNet(torch.nn.Module):  # pytorch/examples' dist-mnist Net
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 10, 5)
        self.conv2 = torch.nn.Conv2d(10, 20, 5)
        self.conv2_drop = torch.nn.Dropout2d()
        self.fc1 = torch.nn.Linear(320, 50)
        self.fc2 = torch.nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = F.relu(self.fc1(x.view(-1, 320)))
        x = F.dropout(x, 0.5, self.training)
        return F.log_softmax(self.fc2(x), 1)


class DigitsMlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = torch.nn.Linear(64, 128), torch.nn.Linear(128, 64), torch.nn.Linear(64, 10)

    def forward(self, x):
        return F.log_softmax(self.fc3(F.relu(self.fc2(F.relu(self.fc1(x))))), 1)


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "mnist"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist.init_process_group("gloo")
    if name == "mnist":
        net, x, y, lr, momentum = MnistNet(), torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,)), 0.01, 0.5
    else:
        net, x, y, lr, momentum = DigitsMlp(), torch.rand(32, 64), torch.randint(0, 10, (32,)), 0.05, 0.9
    ddp = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.SGD(ddp.parameters(), lr=lr, momentum=momentum)
    ms = []
    for s in range(steps + 5):
        t0 = time.perf_counter()
        opt.zero_grad()
        F.nll_loss(ddp(x), y).backward()
        opt.step()
        if s >= 5:
            ms.append((time.perf_counter() - t0) * 1000)
    ms.sort()
    if dist.get_rank() == 0:
        print(json.dumps({"impl": "pytorch-ddp", "model": name, "step_ms_p50": ms[len(ms) // 2],
                          "step_ms_p90": ms[len(ms) * 9 // 10]}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
