# CUDA is optional for the agent (CI machines have nvcc but no GPU; a user may have neither):
# without nvcc the kernel library is skipped with a visible message and the CPU parts still build.
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
    # sm_80 (A100), sm_90 (H100/H200) machine code plus compute_90 PTX for newer parts.
    set(CMAKE_CUDA_ARCHITECTURES "80-real;90" CACHE STRING "CUDA architectures" FORCE)
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  set(LIGER_HAVE_CUDA ON)
  message(STATUS "liger-agent: CUDA ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
else()
  set(LIGER_HAVE_CUDA OFF)
  message(WARNING
    "liger-agent: no CUDA compiler (nvcc) found: the CUDA kernel library and its GPU tests are "
    "skipped. Fix: install the CUDA Toolkit (nvcc on PATH or CUDACXX=/usr/local/cuda/bin/nvcc).")
endif()
