#include "core/export/export_files.h"

#include <fstream>

namespace commtune {

void write_text_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string ddp_bucketing_comment(const nlohmann::json& config) {
  const auto& ddp = config.at("ddp");
  return "# Bucket like the commtune run (DDP reads the first bucket's cap when it is built):\n"
         "#   dist._DEFAULT_FIRST_BUCKET_BYTES = " +
         std::to_string(static_cast<long long>(ddp.at("first_bucket_cap_mb").get<double>() * 1024 * 1024)) +
         "\n#   ddp_model = DistributedDataParallel(model, device_ids=[local_rank], bucket_cap_mb=" +
         nlohmann::json(ddp.at("bucket_cap_mb")).dump() + ")\n";
}

}  // namespace commtune
