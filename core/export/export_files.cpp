#include "core/export/export_files.h"

#include <fstream>

namespace commtune {

void write_text_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string make_ddp_source(const nlohmann::json& config, const std::string& usage) {
  const auto& ddp = config.at("ddp");
  const auto first_bucket_bytes = static_cast<long long>(ddp.at("first_bucket_cap_mb").get<double>() * 1024 * 1024);
  return "def make_ddp(model):\n"
         "    \"\"\"`model` (already on its device) in DistributedDataParallel, bucketed like the commtune run:\n"
         "    on a GPU (NCCL) with device_ids=[its device], on the CPU (Gloo) without.\"\"\"\n"
         "    # DDP reads its first bucket's cap from this module global when it is built.\n"
         "    dist._DEFAULT_FIRST_BUCKET_BYTES = " +
         std::to_string(first_bucket_bytes) +
         "\n"
         "    device = next(model.parameters()).device\n"
         "    device_ids = [device] if device.type == \"cuda\" else None\n"
         "    return torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids, bucket_cap_mb=" +
         nlohmann::json(ddp.at("bucket_cap_mb")).dump() +
         ")\n\n\n"
         "# In a job started by torchrun (or srun), once dist.init_process_group(\"nccl\" or \"gloo\") ran:\n"
         "#   ddp_model = make_ddp(model)\n" +
         usage;
}

}  // namespace commtune
