#!/usr/bin/env bash
# Compiles and runs the Java binding's JUnit 4 tests (Debian's junit4 and
# hamcrest jars).   run_java_tests.sh <build dir> <source dir>
set -euo pipefail
build=$1 src=$2
jars=/usr/share/java/junit4.jar:/usr/share/java/hamcrest-core.jar
for j in /usr/share/java/junit4.jar /usr/share/java/hamcrest-core.jar; do
  [ -f "$j" ] || { echo "missing $j: install junit4 (scripts/bootstrap.sh does)"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp="$build/bindings/java/libddp.jar:$jars:$tmp"
javac -nowarn -d "$tmp" -cp "$cp" "$src"/tests/bindings/java/*.java
# The strategy test trains a TorchScript module that torch exports here
# (skipped with the reason when the venv's torch is missing).
model=""
if "$src/.venv/bin/python" -c "import torch" 2>/dev/null; then
  model="$tmp/mlp.pt"
  "$src/.venv/bin/python" -c "
import torch, sys
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
torch.jit.script(m).save(sys.argv[1])" "$model"
fi
# The at::Tensor helper (tests/torch/aten_helper.cpp) stands in for JavaCPP.
aten=""
[ -f "$build/tests/libddp_test_aten_jni.so" ] && aten="$build/tests/libddp_test_aten_jni.so"
OMP_NUM_THREADS=1 java -Djava.library.path="$build/bindings/java" -Dddp.ddprun="$build/tools/ddprun" \
  -Dddp.model="$model" -Dddp.atenHelper="$aten" -cp "$cp" org.junit.runner.JUnitCore LibddpJavaTest
