# libtorch, from one of two places (COMMTUNE_TORCH):
#   pypi   (default) the PyTorch 2.11 wheel in the project's virtual
#          environment (scripts/setup-torch.sh makes .venv): CUDA, NCCL, the
#          GPU machines' libtorch. Its Python is the reference oracle.
#   debian Debian 12's libtorch-dev 1.13 (CPU, Gloo), the Debian package's
#          build. /usr/bin/python3 with python3-torch is its oracle.
# The oracle is always the torch the engine links: the tests compare like with like.
#
# Defines the interface target commtune::torch with the c10d defines the
# installed build expects (USE_C10D_GLOO, and USE_C10D_NCCL when NCCL is in),
# COMMTUNE_TORCH_HAS_CUDA / COMMTUNE_WITH_NCCL / COMMTUNE_WITH_GLOO, and
# COMMTUNE_ORACLE_PYTHON.
set(COMMTUNE_TORCH "pypi" CACHE STRING "Which libtorch: pypi (the project's .venv) or debian (libtorch-dev)")
set_property(CACHE COMMTUNE_TORCH PROPERTY STRINGS pypi debian)

if(COMMTUNE_TORCH STREQUAL "pypi")
  get_filename_component(_repo "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
  set(COMMTUNE_PYTHON "${_repo}/.venv/bin/python" CACHE FILEPATH
      "The Python whose torch wheel the engine links (scripts/setup-torch.sh makes it)")
  execute_process(COMMAND "${COMMTUNE_PYTHON}" -c "import torch; print(torch.utils.cmake_prefix_path)"
                  OUTPUT_VARIABLE _torch_cmake OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _torch_status
                  ERROR_VARIABLE _torch_error)
  if(NOT _torch_status EQUAL 0)
    message(FATAL_ERROR "${COMMTUNE_PYTHON} cannot import torch: run scripts/setup-torch.sh "
                        "(scripts/build.sh does), or configure with -DCOMMTUNE_TORCH=debian\n${_torch_error}")
  endif()
  get_filename_component(_torch_prefix "${_torch_cmake}/../.." ABSOLUTE)
  # TorchConfig looks up c10 and friends with find_library's default paths
  # first: where Debian's libtorch-dev is installed too, it would link
  # /usr/lib's libc10.so 1.13 into a 2.11 build. Pin each to the wheel.
  foreach(_pin c10:c10_LIBRARY c10_cuda:C10_CUDA_LIBRARY torch:TORCH_LIBRARY kineto:kineto_LIBRARY)
    string(REPLACE ":" ";" _pin ${_pin})
    list(GET _pin 0 _lib)
    list(GET _pin 1 _var)
    find_library(${_var} ${_lib} PATHS "${_torch_prefix}/lib" NO_DEFAULT_PATH)
  endforeach()
  # And TorchConfig's find_package(Caffe2) would find Debian's first.
  set(Caffe2_DIR "${_torch_cmake}/Caffe2" CACHE PATH "The wheel's Caffe2 config" FORCE)
  # Its CUDA setup appends -gencode flags for its architectures (from
  # TORCH_CUDA_ARCH_LIST, else those of a GPU it finds, else all it was built
  # for, sm_50 among them, which CUDA 13's nvcc refuses) to CMAKE_CUDA_FLAGS,
  # and turns CMAKE_CUDA_ARCHITECTURES off (with a warning when it is set):
  # it is told the kernels' architectures, and they keep their own flags.
  set(_cuda_flags "${CMAKE_CUDA_FLAGS}")
  set(_cuda_architectures "${CMAKE_CUDA_ARCHITECTURES}")
  set(_cuda_architectures_cached "$CACHE{CMAKE_CUDA_ARCHITECTURES}")
  set(TORCH_CUDA_ARCH_LIST "")
  foreach(_arch IN LISTS _cuda_architectures)
    string(REGEX REPLACE "^([0-9]+)([0-9])$" "\\1.\\2" _arch "${_arch}")
    list(APPEND TORCH_CUDA_ARCH_LIST "${_arch}")
  endforeach()
  if(NOT TORCH_CUDA_ARCH_LIST)
    set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
  endif()
  unset(CMAKE_CUDA_ARCHITECTURES)
  unset(CMAKE_CUDA_ARCHITECTURES CACHE)
  find_package(Torch REQUIRED CONFIG NO_DEFAULT_PATH PATHS "${_torch_cmake}/Torch")
  set(CMAKE_CUDA_FLAGS "${_cuda_flags}")
  if(_cuda_architectures_cached)
    set(CMAKE_CUDA_ARCHITECTURES "${_cuda_architectures_cached}" CACHE STRING "CUDA architectures" FORCE)
  endif()
  if(_cuda_architectures)
    set(CMAKE_CUDA_ARCHITECTURES "${_cuda_architectures}")
  else()
    unset(CMAKE_CUDA_ARCHITECTURES)
  endif()
  set(COMMTUNE_ORACLE_PYTHON "${COMMTUNE_PYTHON}")
elseif(COMMTUNE_TORCH STREQUAL "debian")
  find_package(Torch REQUIRED CONFIG NO_DEFAULT_PATH PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/Torch)
  set(COMMTUNE_ORACLE_PYTHON /usr/bin/python3)
else()
  message(FATAL_ERROR "COMMTUNE_TORCH must be pypi or debian, got '${COMMTUNE_TORCH}'")
endif()

set(COMMTUNE_TORCH_HAS_CUDA OFF)
if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES)
  set(COMMTUNE_TORCH_HAS_CUDA ON)
endif()
set(COMMTUNE_WITH_NCCL ${COMMTUNE_TORCH_HAS_CUDA})

add_library(commtune_torch INTERFACE)
add_library(commtune::torch ALIAS commtune_torch)
if(COMMTUNE_TORCH STREQUAL "pypi")
  # The wheel's libtorch.so exports a static copy of GCC 13's std::filesystem
  # (pytorch/pytorch#133437); a binary that names libtorch.so before
  # libstdc++.so binds its own std::filesystem calls to that copy, and
  # remove_all there jumped to address 0. libstdc++ first in every binary's
  # DT_NEEDED list makes the system's definitions the ones found first.
  target_link_libraries(commtune_torch INTERFACE "-Wl,--push-state,--no-as-needed" stdc++ "-Wl,--pop-state")
  # The wheel's CUDA libraries (cuDNN, NCCL, cuBLAS, ...) sit in the nvidia
  # packages beside torch/, where libtorch_cuda.so finds them at run time
  # through $ORIGIN. Linking a program, the linker checks them too and looks
  # only where -rpath-link says (where a CUDA toolkit holds them, as on this
  # project's Debian machines, its own paths serve).
  file(GLOB _nvidia_lib_dirs LIST_DIRECTORIES true "${_torch_prefix}/../nvidia/*/lib" "${_torch_prefix}/../nvidia/*/*/lib")
  if(_nvidia_lib_dirs)
    list(JOIN _nvidia_lib_dirs ":" _nvidia_lib_path)
    target_link_options(commtune_torch INTERFACE "LINKER:-rpath-link,${_nvidia_lib_path}")
  endif()
endif()
target_link_libraries(commtune_torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(commtune_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
separate_arguments(_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
target_compile_options(commtune_torch INTERFACE $<$<COMPILE_LANGUAGE:CXX>:${_torch_flags}>)
target_compile_definitions(commtune_torch INTERFACE USE_DISTRIBUTED)
if(COMMTUNE_WITH_NCCL)
  target_compile_definitions(commtune_torch INTERFACE USE_C10D_NCCL COMMTUNE_WITH_NCCL COMMTUNE_TORCH_HAS_CUDA)
endif()
# Neither libtorch ships Gloo's headers: they come from Debian's libgloo-dev
# (2022-05). ProcessGroupGloo's layout holds Gloo objects only behind
# pointers, so the 2.11 wheel's Gloo (a newer commit) is driven through
# these headers too; the oracle tests run it against PyTorch's own DDP.
# Without them a CUDA build still has NCCL; a CPU-only build has nothing else.
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
