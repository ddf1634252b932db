#!/usr/bin/env bash
# Runs each language's example (2-rank all-reduce and a gradient-sync step)
# through ddprun and checks that both ranks printed the averaged gradient.
#   run_examples.sh <build dir> <source dir>
set -euo pipefail
build=$1 src=$2
ddprun="$build/tools/ddprun"
export OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
expect_two() {  # <label> <output>: both ranks printed the average
  local n
  n=$(grep -c 'averaged bias grad.*0.5.*1.5.*2.5.*3.5' <<<"$2" || true)
  [ "$n" = 2 ] || { echo "$1: expected the averaged gradient from 2 ranks, got:"; echo "$2"; exit 1; }
  echo "$1: ok"
}
expect_two C "$("$ddprun" --standalone --nproc-per-node 2 "$build/examples/grad_sync")"
if [ -d "$build/bindings/python/libddp" ]; then
  expect_two Python "$(PYTHONPATH="$build/bindings/python" "$ddprun" --standalone --nproc-per-node 2 \
    "${DDP_PYTHON:-python3}" "$src/examples/python/allreduce_and_grad_sync.py")"
fi
if [ -f "$build/bindings/java/libddp.jar" ]; then
  javac -nowarn -cp "$build/bindings/java/libddp.jar" -d "$tmp" "$src/examples/java/AllReduceAndGradSync.java"
  expect_two Java "$("$ddprun" --standalone --nproc-per-node 2 java -Djava.library.path="$build/bindings/java" \
    -cp "$build/bindings/java/libddp.jar:$tmp" AllReduceAndGradSync)"
fi
if command -v cargo >/dev/null; then
  PKG_CONFIG_PATH="$build" CARGO_TARGET_DIR="$build/rust-target" cargo build --offline --quiet \
    --manifest-path "$src/bindings/rust/Cargo.toml" --example allreduce_and_grad_sync
  expect_two Rust "$("$ddprun" --standalone --nproc-per-node 2 "$build/rust-target/debug/examples/allreduce_and_grad_sync")"
fi
# The LibTorch C++ model (examples/cpp/digits_cnn.cpp): 2 ranks, bf16-mixed,
# synchronised batch norms; its checkpoint loads into the same model written
# in PyTorch, which gets the same held-out count.
if [ -x "$build/examples/digits_cnn" ] && "${DDP_PYTHON:-python3}" -c "import torch, sklearn" 2>/dev/null; then
  "${DDP_PYTHON:-python3}" "$src/examples/digits/export_digits.py" "$tmp/digits" >/dev/null
  out=$("$build/examples/digits_cnn" "$tmp/digits" --epochs 3)
  right=$(sed -n 's/^held-out accuracy [0-9.]* (\([0-9]*\) of 360).*/\1/p' <<<"$out")
  [ -n "$right" ] && [ "$right" -ge 324 ] || { echo "C++ model: expected at least 90% held-out, got:"; echo "$out"; exit 1; }
  "${DDP_PYTHON:-python3}" - "$tmp/digits" "$right" <<'PY'
import sys
import numpy as np
import torch
import torch.nn.functional as F
d, right = sys.argv[1], int(sys.argv[2])

class DigitsCnn(torch.nn.Module):  # examples/cpp/digits_cnn.cpp, in PyTorch
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.BatchNorm2d(16)
        self.conv2, self.bn2 = torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32)
        self.fc = torch.nn.Linear(128, 10)
    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x.view(-1, 1, 8, 8)))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(x.flatten(1))

ckpt = torch.load(f"{d}/cnn.ckpt", weights_only=True)
net = DigitsCnn()
net.load_state_dict(ckpt["state_dict"])  # strict: every name and shape the C++ model's
net.eval()
x = torch.from_numpy(np.fromfile(f"{d}/test_x.f32", dtype=np.float32).reshape(-1, 64))
y = torch.from_numpy(np.fromfile(f"{d}/test_y.i64", dtype=np.int64))
got = int((net(x).argmax(1) == y).sum())
assert got == right, f"PyTorch counts {got} right, the C++ job {right}"
assert len(ckpt["optimizer_states"][0]["state"]) == len(list(net.parameters()))
PY
  echo "C++ model: ok ($right of 360 held out, the same in PyTorch from its checkpoint)"
else
  echo "C++ model: skipped (digits_cnn not built, or no torch/scikit-learn for the data)"
fi
