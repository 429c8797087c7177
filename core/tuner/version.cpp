#include "core/tuner/version.h"

namespace commtune {

std::string version_text() {
  std::string text = "commtune " COMMTUNE_VERSION "\nlibtorch " COMMTUNE_TORCH_VERSION "\n";
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
#if defined(COMMTUNE_HAVE_CUDA_KERNELS)
  text += "CUDA kernels: built";
#else
  text += "CUDA kernels: not built";
#endif
  return text;
}

}  // namespace commtune
