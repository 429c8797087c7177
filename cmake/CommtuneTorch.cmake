# libtorch: Debian's libtorch-dev 1.13 (CPU, Gloo) or a PyTorch 2.x wheel's
# libtorch (CUDA, NCCL), found through CMAKE_PREFIX_PATH=$(python3 -c
# 'import torch;print(torch.utils.cmake_prefix_path)').
#
# Defines the interface target commtune::torch with the c10d defines the
# installed build expects (USE_C10D_GLOO, and USE_C10D_NCCL when NCCL is in),
# and COMMTUNE_TORCH_HAS_CUDA / COMMTUNE_WITH_NCCL.
find_package(Torch REQUIRED)

set(COMMTUNE_TORCH_HAS_CUDA OFF)
if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES)
  set(COMMTUNE_TORCH_HAS_CUDA ON)
endif()
set(COMMTUNE_WITH_NCCL ${COMMTUNE_TORCH_HAS_CUDA})

add_library(commtune_torch INTERFACE)
add_library(commtune::torch ALIAS commtune_torch)
target_link_libraries(commtune_torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(commtune_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
separate_arguments(_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
target_compile_options(commtune_torch INTERFACE $<$<COMPILE_LANGUAGE:CXX>:${_torch_flags}>)
target_compile_definitions(commtune_torch INTERFACE USE_DISTRIBUTED)
if(COMMTUNE_WITH_NCCL)
  target_compile_definitions(commtune_torch INTERFACE USE_C10D_NCCL COMMTUNE_WITH_NCCL COMMTUNE_TORCH_HAS_CUDA)
endif()
# Gloo's headers ship separately on Debian (libgloo-dev). Without them a CUDA
# build still has NCCL; a CPU-only build has nothing else.
find_path(COMMTUNE_GLOO_INCLUDE gloo/algorithm.h HINTS ${TORCH_INCLUDE_DIRS} ${COMMTUNE_EXTRA_INCLUDE_DIRS})
set(COMMTUNE_WITH_GLOO OFF)
if(COMMTUNE_GLOO_INCLUDE)
  set(COMMTUNE_WITH_GLOO ON)
  target_include_directories(commtune_torch SYSTEM INTERFACE ${COMMTUNE_GLOO_INCLUDE})
  target_compile_definitions(commtune_torch INTERFACE USE_C10D_GLOO COMMTUNE_WITH_GLOO)
elseif(NOT COMMTUNE_WITH_NCCL)
  message(FATAL_ERROR "gloo headers not found: install libgloo-dev (scripts/setup-deps.sh does)")
else()
  message(WARNING "gloo headers not found: this build has NCCL only (no CPU training)")
endif()

# The Python interpreter that carries the same torch: the reference oracle.
find_program(COMMTUNE_ORACLE_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
