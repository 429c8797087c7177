#include "core/export/export_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "core/config/run_config.h"

namespace commtune {

void write_text_file(const std::filesystem::path& path, const std::string& text) {
  // O_EXCL | O_NOFOLLOW: the temporary name is ours alone, whatever lies in the folder.
  std::random_device entropy;
  const auto temporary = path.string() + ".tmp" + std::to_string(entropy());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + path.string() + ": " + std::strerror(errno));
  std::size_t written = 0;
  while (written < text.size()) {
    const auto n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<std::size_t>(n);
  }
  const int error = written == text.size() ? 0 : errno;
  if (::close(fd) != 0 || error != 0 || ::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(error ? error : errno);
    ::unlink(temporary.c_str());
    throw std::runtime_error("cannot write " + path.string() + ": " + why);
  }
}

nlohmann::json validated_config(const nlohmann::json& raw) { return RunConfig::parse(raw).to_json(); }

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
