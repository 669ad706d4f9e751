# cmake/nccl.cmake: finds NCCL for the GPU module (real/CMakeLists.txt: the
# real backend's communicators and the NCCL calibration).
# Include it after find_package(CUDAToolkit). Sets the cache variables
# NCCL_INCLUDE_DIR (holds nccl.h) and NCCL_LIBRARY (libnccl), or stops the
# configure: CUDA without NCCL is no GPU run.
#
# NCCL is looked for beside the CUDA Toolkit (/usr/local/cuda ships it
# here), then in NCCL_ROOT / $NCCL_HOME / $NCCL_ROOT (e.g. the nvidia-nccl
# wheel PyTorch installs: site-packages/nvidia/nccl).
include_guard(GLOBAL)

set(_nccl_roots ${NCCL_ROOT} $ENV{NCCL_HOME} $ENV{NCCL_ROOT})
set(_nccl_inc_hints ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
set(_nccl_lib_hints ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
foreach(r ${_nccl_roots})
  list(PREPEND _nccl_inc_hints ${r}/include)
  list(PREPEND _nccl_lib_hints ${r}/lib ${r}/lib64)
endforeach()
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_inc_hints})
# libnccl.so.2 alone: wheels ship no unversioned libnccl.so
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_nccl_lib_hints})
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
  message(FATAL_ERROR
    "megasim: CUDA ${CUDAToolkit_VERSION} is here but NCCL is not "
    "(nccl.h: ${NCCL_INCLUDE_DIR}; libnccl: ${NCCL_LIBRARY}). Looked in "
    "${_nccl_inc_hints} and ${_nccl_lib_hints}. Install NCCL (libnccl-dev, or "
    "the CUDA Toolkit's), point -DNCCL_ROOT=DIR at a tree with include/nccl.h "
    "and lib/libnccl.so*, or configure with -DMEGASIM_CUDA=OFF.")
endif()
message(STATUS "megasim: NCCL ${NCCL_LIBRARY} (headers ${NCCL_INCLUDE_DIR})")
