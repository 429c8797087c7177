// Maps a tensor to the kernels/ dispatch arguments: its device and, on CUDA,
// the current stream of that device.
#pragma once

#include <ATen/core/Tensor.h>

#include "kernels/kernels.h"

namespace commtune {

kernels::Device kernel_device(const at::Tensor& tensor);
void* kernel_stream(const at::Tensor& tensor);

}  // namespace commtune
