#!/usr/bin/env bash
# The Python wheel: built from kernels/python (offline: --no-build-isolation, Debian's setuptools
# and wheel), installed into a fresh venv, then `import liger_kernels` must find the library inside
# the installed package with no environment variable, no PYTHONPATH and no GPU, and load it.
#
#   tests/python/wheel_test.sh <repository> [<prebuilt libliger_kernels.so>]
#
# With a prebuilt library (CTest passes the build's) the wheel packs it instead of compiling the
# kernels a second time. Exit 77 (CTest: skipped) when the library or a build tool is missing.
set -euo pipefail
repo="$1"
prebuilt="${2:-}"
skip() { echo "[  SKIPPED ] $*"; exit 77; }
[ -n "$prebuilt" ] && [ -f "$prebuilt" ] || skip "not run: the kernel library is not built (no nvcc), nothing to pack"
# The first interpreter with what an offline build needs (a pyenv python3 may lack wheel while
# Debian's /usr/bin/python3 has it).
py=""
for candidate in ${PYTHON:-} python3 /usr/bin/python3; do
  if "$candidate" -c "import setuptools, wheel, venv, ensurepip" >/dev/null 2>&1; then py="$candidate"; break; fi
done
[ -n "$py" ] || skip "not run: no python3 with setuptools, wheel and venv (apt-get install python3-setuptools python3-wheel python3-venv)"

work="$(mktemp -d /tmp/liger-wheel-test.XXXXXX)"
trap 'rm -rf "$work"' EXIT
# A copy of the package sources: the build writes build/ and *.egg-info beside setup.py, and the
# checkout under test stays untouched.
cp -r "$repo/kernels/python" "$work/src"
rm -rf "$work/src/build" "$work/src"/*.egg-info
find "$work/src" -name '*.so' -delete
LIGER_KERNELS_PREBUILT="$prebuilt" "$py" -m pip wheel --no-build-isolation --no-deps --no-index \
  -w "$work/dist" "$work/src" >"$work/build.log" 2>&1 || { cat "$work/build.log"; echo "wheel build failed"; exit 1; }
wheel_file="$(ls "$work"/dist/liger_kernels-*.whl)"
echo "built $(basename "$wheel_file")"
# The listing is read whole before it is searched: `zipfile -l | grep -q` under pipefail fails when
# grep stops reading at the first match and zipfile's next write breaks the pipe (CI, 2026-11-26).
listing="$("$py" -m zipfile -l "$wheel_file")"
case "$listing" in
  *liger_kernels/libliger_kernels.so*) ;;
  *) echo "the wheel does not contain liger_kernels/libliger_kernels.so"; echo "$listing"; exit 1 ;;
esac

"$py" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install --no-index --no-deps "$wheel_file" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; echo "pip install of the wheel failed"; exit 1; }

# Away from the repository, with no variable that could point at another copy.
cd "$work"
env -u LIGER_KERNELS_LIBRARY -u PYTHONPATH "$work/venv/bin/python" - <<'PY'
import os
import sys

import liger_kernels

path = liger_kernels.library_path()
package_dir = os.path.dirname(os.path.abspath(liger_kernels.__file__))
print("liger_kernels from", package_dir)
print("library_path():", path)
assert package_dir.startswith(sys.prefix), f"imported {package_dir}, not the venv's copy under {sys.prefix}"
assert os.path.dirname(os.path.abspath(path)) == package_dir, f"{path} is not the library inside the package"
print("liger_version():", liger_kernels.library_version())  # loads the .so (no GPU needed to load it)
PY
# Where torch sees a GPU (the GPU machine), the binding tests run against the installed wheel.
if "$work/venv/bin/python" -c "import torch, pytest, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
  echo "== binding tests against the installed wheel"
  env -u LIGER_KERNELS_LIBRARY -u PYTHONPATH LIGER_TEST_INSTALLED=1 "$work/venv/bin/python" -m pytest -q -p no:cacheprovider \
    "$repo/tests/python/test_abi.py" "$repo/tests/python/test_ops.py"
elif "$py" -c "import torch, pytest, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
  # torch lives in the interpreter's own environment (a venv of its own, as on the GPU machine), which
  # a new venv does not see: install the wheel into a target folder for that interpreter instead.
  "$py" -m pip install --no-index --no-deps --target "$work/site" "$wheel_file" >"$work/install-target.log" 2>&1 ||
    { cat "$work/install-target.log"; echo "pip install --target of the wheel failed"; exit 1; }
  (cd "$work" && env -u LIGER_KERNELS_LIBRARY PYTHONPATH="$work/site" "$py" -c \
    "import liger_kernels, sys; f = liger_kernels.__file__; assert f.startswith(sys.argv[1]), f; print('liger_kernels from', f)" \
    "$work/site")
  echo "== binding tests against the installed wheel ($work/site)"
  env -u LIGER_KERNELS_LIBRARY PYTHONPATH="$work/site" LIGER_TEST_INSTALLED=1 "$py" -m pytest -q -p no:cacheprovider \
    "$repo/tests/python/test_abi.py" "$repo/tests/python/test_ops.py" ${LIGER_WHEEL_PYTEST_ARGS:-}
else
  echo "binding tests against the wheel: not run (no torch with a CUDA device in this interpreter)"
fi
echo "wheel OK"
