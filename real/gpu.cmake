# real/gpu.cmake: the GPU half of the real backend (rt_gpu.c, rt_gpu_kern.cu,
# comm_nccl.c) added to megasim_real. Included from real/CMakeLists.txt
# after add_library(megasim_real ...), only when MEGASIM_HAVE_CUDA is ON.
# NCCL is looked for beside the CUDA Toolkit (/usr/local/cuda ships it
# here), then in NCCL_ROOT / $NCCL_HOME / $NCCL_ROOT (e.g. the nvidia-nccl
# wheel PyTorch installs: site-packages/nvidia/nccl); CUDA without NCCL
# stops the configure, since a GPU run without collectives is no run.
if(NOT TARGET megasim_real)
  message(FATAL_ERROR "real/gpu.cmake: include it after add_library(megasim_real ...)")
endif()

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

target_sources(megasim_real PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/rt_gpu.c
  ${CMAKE_CURRENT_LIST_DIR}/rt_gpu_kern.cu
  ${CMAKE_CURRENT_LIST_DIR}/comm_nccl.c)
target_compile_definitions(megasim_real PUBLIC REAL_HAVE_CUDA)
target_include_directories(megasim_real PRIVATE ${NCCL_INCLUDE_DIR})
target_compile_options(megasim_real PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo -Xcompiler=-Wall>)
set_target_properties(megasim_real PROPERTIES CUDA_STANDARD 17)
# megasim_kernels_cuda brings KERN_HAVE_CUDA, cuBLASLt and the references
target_link_libraries(megasim_real PUBLIC megasim_kernels_cuda CUDA::cudart ${NCCL_LIBRARY})
