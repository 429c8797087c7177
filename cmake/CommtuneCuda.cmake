# Optional CUDA toolchain for kernels/cuda. The build works without it; with
# /usr/local/cuda present the kernels are compiled even where no GPU exists.
include(CheckLanguage)
set(COMMTUNE_HAVE_CUDA OFF)
if(NOT COMMTUNE_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Ampere and Hopper (the lent H100/H200 are sm_90); CUDA 13 has dropped the older ones.
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    # One CUDA runtime per process: libtorch's (shared), not a static copy of it
    # in the kernels, so streams and device state are the same runtime's.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    find_package(CUDAToolkit REQUIRED)
    set(COMMTUNE_HAVE_CUDA ON)
  elseif(COMMTUNE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "COMMTUNE_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
