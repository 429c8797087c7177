#include "core/version.h"

#include <torch/version.h>

#include "kernels/kernels.h"

namespace commtune {

std::string version_text() {
  std::string text = "commtune " COMMTUNE_VERSION "\nlibtorch " TORCH_VERSION "\n";
#if defined(COMMTUNE_TORCH_HAS_CUDA)
  text += "CUDA: yes (libtorch with CUDA)\n";
#else
  text += "CUDA: no (CPU-only libtorch)\n";
#endif
#if defined(COMMTUNE_WITH_NCCL)
  text += "NCCL: yes\n";
#else
  text += "NCCL: no\n";
#endif
#if defined(COMMTUNE_WITH_GLOO)
  text += "Gloo: yes\n";
#else
  text += "Gloo: no\n";
#endif
  text += std::string("CUDA kernels: ") + (kernels::cuda_compiled() ? "built" : "not built");
  return text;
}

}  // namespace commtune
