# real/gpu.cmake: the GPU half of the real backend (rt_gpu.c, rt_gpu_kern.cu,
# comm_nccl.c) added to megasim_real. Included from real/CMakeLists.txt
# after add_library(megasim_real ...), only when MEGASIM_HAVE_CUDA is ON.
# NCCL is found by cmake/nccl.cmake (shared with calib/): beside the CUDA
# Toolkit, then in NCCL_ROOT / $NCCL_HOME / $NCCL_ROOT; CUDA without NCCL
# stops the configure, since a GPU run without collectives is no run.
if(NOT TARGET megasim_real)
  message(FATAL_ERROR "real/gpu.cmake: include it after add_library(megasim_real ...)")
endif()

include(${PROJECT_SOURCE_DIR}/cmake/nccl.cmake) # NCCL_INCLUDE_DIR, NCCL_LIBRARY

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
