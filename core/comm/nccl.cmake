# The NCCL plugin (libddp_nccl.so), when CUDA runtime and NCCL headers exist.
# NCCL's header is taken from the wheel's nvidia-nccl package when present,
# so that it matches the NCCL libtorch_cuda was built against.
set(DDP_CUDA_INCLUDE "")
foreach(_dir "$ENV{CUDA_HOME}/include" /usr/local/cuda/include /usr/include)
  if(NOT DDP_CUDA_INCLUDE AND EXISTS "${_dir}/cuda_runtime_api.h")
    set(DDP_CUDA_INCLUDE "${_dir}")
  endif()
endforeach()
set(DDP_NCCL_INCLUDE "")
foreach(_dir "${DDP_TORCH_ROOT}/../nvidia/nccl/include" "${DDP_CUDA_INCLUDE}" /usr/local/include)
  if(NOT DDP_NCCL_INCLUDE AND EXISTS "${_dir}/nccl.h")
    get_filename_component(DDP_NCCL_INCLUDE "${_dir}" ABSOLUTE)
  endif()
endforeach()

if(DDP_WITH_NCCL AND DDP_TORCH_HAS_CUDA AND DDP_CUDA_INCLUDE AND DDP_NCCL_INCLUDE)
  message(STATUS "libddp: NCCL plugin with CUDA headers ${DDP_CUDA_INCLUDE}, NCCL ${DDP_NCCL_INCLUDE}")
  set(DDP_BUILD_NCCL_PLUGIN ON)
else()
  message(STATUS "libddp: no NCCL plugin (CUDA or NCCL headers not found, or DDP_WITH_NCCL=OFF)")
  set(DDP_BUILD_NCCL_PLUGIN OFF)
endif()
