#include "core/engine/hooks/compressed_hook.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "core/engine/compress/compressor.h"
#include "core/engine/compress/device_compressor.h"
#include "core/engine/hooks/byteps_server.h"

namespace commtune {

namespace {

class CompressedHook final : public CommHook {
 public:
  CompressedHook(const CompressorOptions& options, HookEnv& env) : options_(options), env_(env) {
    const int world = env.world_size();
    const auto per_node = static_cast<int>(options.ranks_per_node);
    if (per_node > 0) {
      node_ = consecutive_group(env.comm, per_node, "hook.ranks_per_node", "byteps-node");
      std::vector<int> leaders;
      for (int r = 0; r < world; r += per_node) leaders.push_back(r);
      leaders_ = env.comm.split(leaders, "byteps-leaders/");
    }
  }

  // Waits between the size exchange, the gather and the decode.
  bool may_block() const override { return true; }
  void begin_step(std::int64_t, double lr) override { lr_ = lr; }

  Future run(GradBucket& bucket) override {
    auto buffer = bucket.buffer();
    const auto n = buffer.numel();
    const int world = env_.world_size();
    if (n * 4 < options_.byteps_min_compress_bytes) {
      if (bucket.gradient_scale() == 1.0) buffer.div_(world);
      return env_.comm.allreduce_sum(buffer);
    }
    if (node_) {
      // Level one: the node sums in fp16; its leader carries the sum on.
      auto half = buffer.to(at::kHalf);
      Communicator::wait(node_->allreduce_sum(half));
      if (leaders_) buffer.copy_(exchange(leaders_.get(), half.to(at::kFloat), bucket.index(), world));
      Communicator::wait(node_->broadcast(buffer, 0));
      return Communicator::completed(buffer);
    }
    buffer.copy_(exchange(&env_.comm, buffer, bucket.index(), world));
    return Communicator::completed(buffer);
  }

  void save_state(State& out) const override {
    c10::impl::GenericDict dict(c10::IntType::get(), c10::TensorType::get());
    auto put = [&](std::size_t index, std::int64_t numel, const std::vector<std::uint8_t>& bytes) {
      auto t = at::empty({static_cast<std::int64_t>(bytes.size())}, at::kByte);
      std::memcpy(t.data_ptr<std::uint8_t>(), bytes.data(), bytes.size());
      dict.insert(static_cast<std::int64_t>(index), t);
      out.insert("numel_" + std::to_string(index), numel);
    };
    for (const auto& [index, entry] : compressors_) {
      std::vector<std::uint8_t> bytes;
      if (entry.compressor)
        entry.compressor->save(bytes);
      else
        entry.device->save(bytes);
      put(index, entry.numel, bytes);
    }
    for (const auto& [index, state] : loaded_)  // restored from a checkpoint, not used since
      if (!compressors_.count(index)) put(index, state.first, state.second);
    out.insert("compressors", dict);
  }

  void load_state(const State& in) override {
    compressors_.clear();
    loaded_.clear();
    for (const auto& item : in.at("compressors").toGenericDict()) {
      const auto index = static_cast<std::size_t>(item.key().toInt());
      const auto t = item.value().toTensor().contiguous();
      const auto numel = in.at("numel_" + std::to_string(index)).toInt();
      loaded_[index] = {numel, std::vector<std::uint8_t>(t.data_ptr<std::uint8_t>(), t.data_ptr<std::uint8_t>() + t.numel())};
    }
  }

 private:
  struct Entry {
    std::int64_t numel = 0;
    std::unique_ptr<Compressor> compressor;     // the host path's, or
    std::unique_ptr<DeviceCompressor> device;  // the device path's
  };

  // Compresses `gradients` (n floats), exchanges the payloads over `comm`,
  // and returns the sum of every payload's decoding, each weighted by
  // 1/ranks (the world's ranks), decoded in rank order.
  at::Tensor exchange(Communicator* comm, const at::Tensor& gradients, std::size_t index, int ranks) {
    const auto& where = options_.byteps_compress_on;
    if ((where == "device" || (where == "auto" && gradients.is_cuda())) &&
        has_device_path(options_.byteps_compressor_type))
      return exchange_on_device(comm, gradients, index, ranks);
    const auto n = gradients.numel();
    const int world = comm->size();
    auto start = thread_cpu_ns();
    auto& compressor = compressor_for(index, n);
    auto x = gradients.to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true).contiguous();
    auto payload = at::empty({static_cast<std::int64_t>(compressor.max_payload_bytes(n))}, at::kByte);
    compressor.set_learning_rate(lr_);
    const auto used = compressor.compress(x.data_ptr<float>(), n, payload.data_ptr<std::uint8_t>());
    env_.clock.add_compute_ns(thread_cpu_ns() - start);

    // Variable-size payloads (dithering) first agree on the largest.
    const auto device = gradients.device();
    std::vector<std::int64_t> sizes(static_cast<std::size_t>(world), static_cast<std::int64_t>(used));
    std::int64_t width = static_cast<std::int64_t>(used);
    if (!compressor.fixed_size()) {
      auto mine = at::full({1}, static_cast<std::int64_t>(used), at::TensorOptions().dtype(at::kLong).device(device));
      auto all = at::empty({world}, mine.options());
      const auto gathered_sizes = Communicator::wait(comm->allgather(mine, all)).cpu();
      for (int r = 0; r < world; ++r) sizes[r] = gathered_sizes[r].item<std::int64_t>();
      width = *std::max_element(sizes.begin(), sizes.end());
    }
    payload.narrow(0, static_cast<std::int64_t>(used), width - static_cast<std::int64_t>(used))
        .zero_();  // no stale bytes on the wire
    auto outgoing = payload.narrow(0, 0, width).to(device);
    auto incoming = at::empty({world * width}, outgoing.options());
    const auto received = Communicator::wait(comm->allgather(outgoing, incoming)).cpu().contiguous();

    start = thread_cpu_ns();
    auto sum = at::empty({n}, at::kFloat);
    const auto* bytes = received.data_ptr<std::uint8_t>();
    const float weight = 1.0f / static_cast<float>(ranks);
    compressor.decompress(bytes, static_cast<std::size_t>(sizes[0]), n, weight, sum.data_ptr<float>());
    for (int r = 1; r < world; ++r)
      compressor.decompress_add(bytes + r * width, static_cast<std::size_t>(sizes[r]), n, weight,
                                sum.data_ptr<float>());
    env_.clock.add_compute_ns(thread_cpu_ns() - start);

    std::vector<std::pair<std::string, double>> reports;
    compressor.report(reports);
    report(index, n, used, reports);
    return sum;
  }

  // The same exchange without leaving the bucket's device: compressed,
  // gathered and decoded there (device_compressor.h). Every payload has the
  // same size, so no size exchange.
  at::Tensor exchange_on_device(Communicator* comm, const at::Tensor& gradients, std::size_t index, int ranks) {
    const auto n = gradients.numel();
    const int world = comm->size();
    auto start = thread_cpu_ns();
    auto& compressor = device_compressor_for(index, n, gradients.device());
    auto x = gradients.to(at::kFloat, /*non_blocking=*/false, /*copy=*/true).contiguous();
    const auto width = compressor.payload_bytes();
    auto outgoing = at::empty({width}, x.options().dtype(at::kByte));
    compressor.set_learning_rate(lr_);
    compressor.compress(x, outgoing);
    env_.clock.add_compute_ns(thread_cpu_ns() - start);
    auto incoming = at::empty({world * width}, outgoing.options());
    Communicator::wait(comm->allgather(outgoing, incoming));

    start = thread_cpu_ns();
    auto sum = at::zeros({n}, x.options());
    const float weight = 1.0f / static_cast<float>(ranks);
    for (int r = 0; r < world; ++r) compressor.decompress_add(incoming.narrow(0, r * width, width), weight, sum);
    env_.clock.add_compute_ns(thread_cpu_ns() - start);
    std::vector<std::pair<std::string, double>> reports;
    compressor.report(reports);
    report(index, n, static_cast<std::size_t>(width), reports);
    return sum;
  }

  void report(std::size_t index, std::int64_t n, std::size_t used,
              const std::vector<std::pair<std::string, double>>& reports) {
    env_.stats.set_bucket(index, "payload_bytes", static_cast<double>(used));
    env_.stats.set_bucket(index, "compression_rate", 4.0 * static_cast<double>(n) / static_cast<double>(used));
    for (const auto& [name, value] : reports) env_.stats.set_bucket(index, name, value);
  }

  // One compressor per bucket, on the host or on the bucket's device; a
  // bucket that changed size (DDP rebuilds its buckets after the first
  // step) starts afresh. A checkpoint's state is applied when the bucket's
  // compressor is made, on whichever side (both keep the same layout).
  Compressor& compressor_for(std::size_t index, std::int64_t n) {
    auto& entry = compressors_[index];
    if (!entry.compressor || entry.numel != n) {
      entry = {n, make_compressor(options_, n, stream_of(index)), nullptr};
      restore(index, n, *entry.compressor);
    }
    return *entry.compressor;
  }

  DeviceCompressor& device_compressor_for(std::size_t index, std::int64_t n, const at::Device& device) {
    auto& entry = compressors_[index];
    if (!entry.device || entry.numel != n) {
      entry = {n, nullptr, make_device_compressor(options_, n, stream_of(index), device)};
      restore(index, n, *entry.device);
    }
    return *entry.device;
  }

  std::uint64_t stream_of(std::size_t index) const { return (static_cast<std::uint64_t>(env_.rank()) << 32) | index; }

  template <class AnyCompressor>
  void restore(std::size_t index, std::int64_t n, AnyCompressor& compressor) {
    const auto it = loaded_.find(index);
    if (it == loaded_.end()) return;
    if (it->second.first == n) {
      std::size_t pos = 0;
      compressor.load(it->second.second, pos);
    }
    loaded_.erase(it);
  }

  CompressorOptions options_;
  HookEnv& env_;
  double lr_ = 0;
  std::unique_ptr<Communicator> node_;     // two-level: this rank's node
  std::unique_ptr<Communicator> leaders_;  // two-level: the node leaders, on leaders only
  std::map<std::size_t, Entry> compressors_;
  std::map<std::size_t, std::pair<std::int64_t, std::vector<std::uint8_t>>> loaded_;  // from a checkpoint, by bucket
};

}  // namespace

namespace {
const char* const kBytepsDoc =
    "BytePS's compression (onebit, topk, randomk or dithering, with optional error feedback and Nesterov momentum): "
    "with byteps_aggregation=server (the default) as BytePS runs it - workers push compressed partitions, a server "
    "stage sums and recompresses them with its own error feedback, workers pull; with allgather, every rank decodes "
    "and averages every rank's compressed bucket instead (no server stage)";

std::unique_ptr<CommHook> make_byteps_hook(const CompressorOptions& options, HookEnv& env) {
  check_composition(options);  // before training starts
  if (options.byteps_aggregation == "server") return make_byteps_server_hook(options, env);
  if (options.byteps_compress_on == "device" && !has_device_path(options.byteps_compressor_type))
    throw ConfigError("hook.byteps_compress_on",
                      "'device' needs onebit, topk or randomk: " + options.byteps_compressor_type +
                          " encodes on the host (use auto or host)");
  return std::make_unique<CompressedHook>(options, env);
}
}  // namespace

void register_compressed_hooks(HookRegistry& registry) {
  registry.add<CompressorOptions>("byteps", kBytepsDoc, make_byteps_hook);
}

void refresh_compressed_hooks(HookRegistry& registry) {
  registry.replace<CompressorOptions>("byteps", kBytepsDoc, make_byteps_hook);
}

}  // namespace commtune
