# Imported targets for LibTorch taken from the pinned `torch` wheel in .venv/.
#
# We do not use find_package(Torch): on the CUDA wheel it insists on a CUDA
# toolkit and adds CUDA flags to every target, and a CPU-only libddp must not
# need one. Instead we ask Python where torch lives and make our own targets:
#   ddp::torch_cpu   c10 + torch_cpu (ATen, autograd, c10d with Gloo)
#   ddp::torch_cuda  torch_cuda + c10_cuda (only when DDP_TORCH_HAS_CUDA)
#
# Inputs: DDP_PYTHON (default: <repo>/.venv/bin/python) or DDP_TORCH_ROOT.

set(DDP_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH
    "Python with the pinned torch (LibTorch, and the peers of parity tests and benchmarks)")
if(NOT DDP_TORCH_ROOT)
  execute_process(
    COMMAND "${DDP_PYTHON}" -c
      "import os, torch; print(os.path.dirname(torch.__file__)); print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); print(torch.__version__)"
    OUTPUT_VARIABLE _ddp_torch_out
    RESULT_VARIABLE _ddp_torch_rc
    ERROR_VARIABLE _ddp_torch_err
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _ddp_torch_rc EQUAL 0)
    message(FATAL_ERROR
      "libddp: cannot import torch with ${DDP_PYTHON}: ${_ddp_torch_err}\n"
      "Run scripts/bootstrap.sh first, or pass -DDDP_TORCH_ROOT=<site-packages/torch>.")
  endif()
  string(REPLACE "\n" ";" _ddp_torch_out "${_ddp_torch_out}")
  list(GET _ddp_torch_out 0 DDP_TORCH_ROOT)
  list(GET _ddp_torch_out 1 DDP_TORCH_CXX11_ABI)
  list(GET _ddp_torch_out 2 DDP_TORCH_VERSION)
endif()
if(NOT DEFINED DDP_TORCH_CXX11_ABI)
  set(DDP_TORCH_CXX11_ABI 1)
endif()
set(DDP_TORCH_ROOT "${DDP_TORCH_ROOT}" CACHE PATH "torch package directory" FORCE)
set(DDP_TORCH_CXX11_ABI "${DDP_TORCH_CXX11_ABI}" CACHE STRING "torch C++11 ABI flag" FORCE)
set(DDP_TORCH_VERSION "${DDP_TORCH_VERSION}" CACHE STRING "torch version" FORCE)
set(DDP_TORCH_LIBDIR "${DDP_TORCH_ROOT}/lib")
message(STATUS "libddp: LibTorch ${DDP_TORCH_VERSION} from ${DDP_TORCH_ROOT}")

foreach(_lib c10 torch_cpu torch)
  if(NOT EXISTS "${DDP_TORCH_LIBDIR}/lib${_lib}.so")
    message(FATAL_ERROR "libddp: ${DDP_TORCH_LIBDIR}/lib${_lib}.so not found")
  endif()
endforeach()

# The wheel ships c10d's ProcessGroupGloo.hpp but not the Gloo headers it
# includes; core/comm/gloo_decls supplies forward declarations instead (every
# Gloo member of ProcessGroupGloo is held through a smart pointer).
set(DDP_TORCH_HAS_GLOO_HEADERS OFF)
if(EXISTS "${DDP_TORCH_ROOT}/include/gloo/context.h")
  set(DDP_TORCH_HAS_GLOO_HEADERS ON)
endif()

add_library(ddp_torch_cpu INTERFACE)
add_library(ddp::torch_cpu ALIAS ddp_torch_cpu)
target_include_directories(ddp_torch_cpu SYSTEM INTERFACE
  "${DDP_TORCH_ROOT}/include"
  "${DDP_TORCH_ROOT}/include/torch/csrc/api/include")
target_compile_definitions(ddp_torch_cpu INTERFACE
  _GLIBCXX_USE_CXX11_ABI=${DDP_TORCH_CXX11_ABI} USE_DISTRIBUTED USE_C10D_GLOO)
target_link_libraries(ddp_torch_cpu INTERFACE
  "${DDP_TORCH_LIBDIR}/libtorch_cpu.so" "${DDP_TORCH_LIBDIR}/libc10.so")

set(DDP_TORCH_HAS_CUDA OFF)
if(EXISTS "${DDP_TORCH_LIBDIR}/libtorch_cuda.so")
  set(DDP_TORCH_HAS_CUDA ON)
  add_library(ddp_torch_cuda INTERFACE)
  add_library(ddp::torch_cuda ALIAS ddp_torch_cuda)
  target_link_libraries(ddp_torch_cuda INTERFACE
    "${DDP_TORCH_LIBDIR}/libtorch_cuda.so" "${DDP_TORCH_LIBDIR}/libc10_cuda.so")
endif()
