#!/usr/bin/env bash
# The Python binding installed the way Python installs things: `pip wheel .`
# at the repository's root builds a wheel (pyproject.toml, scikit-build-core,
# against this build's libddp), which installs into a new virtualenv that has
# nothing else (no NumPy, no torch); there, from another directory and with
# no LD_LIBRARY_PATH, `import libddp` works and a 2-rank all-reduce through
# the package's own ddprun-free spawn gives the sum. `pip install .` into a
# target directory gives the same package.
#   test_pip_package.sh <build dir> <source dir> <python with scikit-build-core>
set -euo pipefail
build=$1 src=$2 py=$3
"$py" -c "import scikit_build_core" 2>/dev/null ||
  { echo "skipped: scikit-build-core is not in $py's environment (scripts/bootstrap.sh installs it)"; exit 77; }
command -v swig >/dev/null || { echo "skipped: swig not found"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PKG_CONFIG_PATH="$build" CMAKE_BUILD_PARALLEL_LEVEL=2
# pip builds in the source tree's build/ of scikit-build-core's own: a temporary one here.
(cd "$src" && "$py" -m pip wheel . --no-build-isolation --no-deps -q -w "$work/wheels" \
  --config-settings=build-dir="$work/skbuild")
wheel=$(ls "$work"/wheels/libddp-*.whl)
echo "built $(basename "$wheel")"

python3 -m venv "$work/venv"
"$py" -m pip --python "$work/venv/bin/python" install --no-deps --no-index -q "$wheel"
cat > "$work/job.py" <<'PY'
import libddp

def work(worker, arg):
    with libddp.Group() as g:
        t = libddp.Tensor.zeros(libddp.FLOAT32, [2])
        t.copy_from(bytes(bytearray([0, 0, 128, 63]) * 2) if g.rank() == 0 else bytes(bytearray([0, 0, 0, 64]) * 2))
        g.all_reduce(t, libddp.SUM)  # 1.0 + 2.0 on each element
        out = bytearray(8)
        t.copy_to(out)
        if g.rank() == 0:
            worker.set_result(bytes(out))
    return 0

if __name__ == "__main__":
    import struct
    got = struct.unpack("2f", libddp.spawn(work, 2))
    print("sum", got, "from", libddp.__file__)
    assert got == (3.0, 3.0), got
PY
out=$(cd / && env -u LD_LIBRARY_PATH -u PYTHONPATH OMP_NUM_THREADS=1 timeout 120 "$work/venv/bin/python" "$work/job.py")
echo "$out"
grep -q "sum (3.0, 3.0) from $work/venv/" <<<"$out" || { echo "FAIL: the wheel's libddp did not run the job"; exit 1; }

(cd "$src" && "$py" -m pip install . --no-build-isolation --no-deps -q --target "$work/target" \
  --config-settings=build-dir="$work/skbuild")
(cd / && env -u LD_LIBRARY_PATH PYTHONPATH="$work/target" "$py" -c "import libddp; print('pip install .:', libddp.version_string(), libddp.__file__)") |
  grep -q "^pip install .: .* $work/target/libddp/__init__.py" || { echo "FAIL: pip install . gave no importable libddp"; exit 1; }
echo "PASS: pip wheel . and pip install . give an importable libddp, no LD_LIBRARY_PATH"
