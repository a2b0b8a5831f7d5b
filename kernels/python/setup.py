"""Build step of the liger-kernels wheel: compiles libliger_kernels.so with CMake and puts it
inside the package (liger_kernels/libliger_kernels.so, the first place _lib.py looks).

Environment:
  LIGER_CUDA_ARCHS        CUDA architectures (default "80-real;90": sm_80 + sm_90 code, compute_90 PTX)
  LIGER_KERNELS_PREBUILT  path of an already-built libliger_kernels.so to pack instead of compiling
                          (CI reuses the main build's library this way)
  LIGER_BUILD_JOBS        parallel compile jobs (default: the CPU count)
  CUDACXX                 nvcc to use (default: PATH, then /usr/local/cuda*/bin/nvcc)

Metadata is in pyproject.toml; this file only adds the build step.
"""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))  # kernels/python -> repository root
LIB_NAME = "libliger_kernels.so"
TORCH_OPS_NAME = "libliger_torch_ops.so"  # with its ".torch-version" stamp, packed when built


def _fail(message):
    sys.stderr.write(f"\nliger-kernels build: {message}\n\n")
    raise SystemExit(1)


def _find_nvcc():
    explicit = os.environ.get("CUDACXX")
    if explicit:
        return explicit
    found = shutil.which("nvcc")
    if found:
        return found
    for candidate in sorted(glob.glob("/usr/local/cuda*/bin/nvcc"), reverse=True):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def _cmake_build(build_temp):
    if not os.path.isfile(os.path.join(REPO, "CMakeLists.txt")) or not os.path.isdir(os.path.join(REPO, "kernels")):
        _fail(
            f"the kernel sources are not at {REPO} (this package is built from kernels/python of a clone); "
            "set LIGER_KERNELS_PREBUILT to an existing libliger_kernels.so to pack that instead"
        )
    if shutil.which("cmake") is None:
        _fail("cmake not found: apt-get install cmake (or set LIGER_KERNELS_PREBUILT)")
    nvcc = _find_nvcc()
    if nvcc is None:
        _fail("nvcc not found (PATH, CUDACXX, /usr/local/cuda*/bin): install the CUDA Toolkit, "
              "or set LIGER_KERNELS_PREBUILT to an existing libliger_kernels.so")
    archs = os.environ.get("LIGER_CUDA_ARCHS", "80-real;90")
    configure = [
        "cmake", "-S", REPO, "-B", build_temp,
        "-DCMAKE_BUILD_TYPE=Release",
        "-DLIGER_BUILD_AGENT=OFF", "-DLIGER_BUILD_TESTS=OFF", "-DLIGER_BUILD_BENCHMARKS=OFF",
        f"-DCMAKE_CUDA_COMPILER={nvcc}", f"-DCMAKE_CUDA_ARCHITECTURES={archs}",
    ]
    if shutil.which("ninja"):
        configure[1:1] = ["-G", "Ninja"]
    if os.path.isfile(os.path.join(build_temp, "CMakeCache.txt")):
        # Re-configure with the generator it has (CMake refuses a different -G).
        configure = ["cmake", "-S", REPO, "-B", build_temp, f"-DCMAKE_CUDA_ARCHITECTURES={archs}"]
    jobs = os.environ.get("LIGER_BUILD_JOBS") or str(os.cpu_count() or 2)
    print(f"liger-kernels: building {LIB_NAME} for CUDA architectures {archs} in {build_temp}", flush=True)
    subprocess.check_call(configure)
    subprocess.check_call(["cmake", "--build", build_temp, "--target", "liger_kernels", "-j", jobs])
    built = os.path.join(build_temp, "kernels", LIB_NAME)
    if not os.path.isfile(built):
        _fail(f"the build finished without {built}: is the CUDA compiler usable? (see the CMake output above)")
    # The C++ op registrations: configured only when CMake's python3 imports a CUDA PyTorch (the
    # stamp file says so); without them the package uses its Python implementations of the ops.
    if os.path.isfile(os.path.join(build_temp, "kernels", TORCH_OPS_NAME + ".torch-version")):
        subprocess.check_call(["cmake", "--build", build_temp, "--target", "liger_torch_ops", "-j", jobs])
    else:
        print(f"liger-kernels: {TORCH_OPS_NAME} not configured (CMake's python3 has no CUDA PyTorch); "
              "the package will use its Python op implementations", flush=True)
    return built


class BuildPyWithLibrary(build_py):
    """build_py, then the shared library into the package directory of the build."""

    def run(self):
        super().run()
        prebuilt = os.environ.get("LIGER_KERNELS_PREBUILT", "")
        if prebuilt:
            if not os.path.isfile(prebuilt):
                _fail(f"LIGER_KERNELS_PREBUILT={prebuilt!r} is not a file")
            library = prebuilt
        else:
            build_temp = os.path.join(os.path.abspath(self.build_lib), os.pardir, "liger_kernels_cmake")
            library = _cmake_build(os.path.normpath(build_temp))
        target = os.path.join(self.build_lib, "liger_kernels", LIB_NAME)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(library, target)
        os.chmod(target, 0o755)
        print(f"liger-kernels: packed {library} as liger_kernels/{LIB_NAME}", flush=True)
        torch_ops = os.path.join(os.path.dirname(library), TORCH_OPS_NAME)
        if os.path.isfile(torch_ops) and os.path.isfile(torch_ops + ".torch-version"):
            for source in (torch_ops, torch_ops + ".torch-version"):
                shutil.copyfile(source, os.path.join(os.path.dirname(target), os.path.basename(source)))
            os.chmod(os.path.join(os.path.dirname(target), TORCH_OPS_NAME), 0o755)
            print(f"liger-kernels: packed {torch_ops} as liger_kernels/{TORCH_OPS_NAME}", flush=True)


class BinaryDistribution(Distribution):
    """The wheel holds a native library: tag it for this platform, not as pure Python."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithLibrary}, distclass=BinaryDistribution)
