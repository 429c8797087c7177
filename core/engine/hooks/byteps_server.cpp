#include "core/engine/hooks/byteps_server.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace commtune {

namespace {

// One compressed partition of one parameter's gradient, where it lies in the bucket.
struct Piece {
  std::size_t parameter;  // the model's parameter index
  std::int64_t partition;
  std::int64_t offset, numel;
};

// BYTEPS_PARTITION_BYTES rounded up to whole 4 KiB pages (common/global.cc), in elements.
std::int64_t partition_numel(const CompressorOptions& o) {
  constexpr std::int64_t page = 4096;
  return (o.byteps_partition_bytes + page - 1) / page * page / 4;
}

std::size_t padded4(std::size_t bytes) { return (bytes + 3) / 4 * 4; }

bool is_norm(const std::string& name) { return name.size() >= 5 && name.compare(name.size() - 5, 5, "_norm") == 0; }

// Statistics of many partitions as one: norms in quadrature, counts summed.
void merge_reports(const std::vector<std::pair<std::string, double>>& from, std::map<std::string, double>& into) {
  for (const auto& [name, value] : from) into[name] += is_norm(name) ? value * value : value;
}

class BytepsServerHook final : public CommHook {
 public:
  BytepsServerHook(const CompressorOptions& options, HookEnv& env)
      : options_(options), server_options_(options), env_(env) {
    server_options_.byteps_momentum_type = "none";  // a server builds no momentum (compressor_registry.cc)
  }

  bool may_block() const override { return true; }
  void begin_step(std::int64_t, double lr) override { lr_ = lr; }

  Future run(GradBucket& bucket) override {
    auto buffer = bucket.buffer();
    const int world = env_.world_size();
    // BytePS compresses in host memory; the copy also takes a wrapper's half-precision buffer.
    auto host = buffer.to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true).contiguous();
    // MXNet's trainer multiplies each gradient by 1/workers before the push, which sums (mxnet/__init__.py).
    if (bucket.gradient_scale() == 1.0) host.mul_(1.0 / world);
    float* gradients = host.data_ptr<float>();
    auto start = thread_cpu_ns();

    // Parameters under the threshold travel whole and uncompressed (operations.cc: InitTensor);
    // the others in partitions, each compressed on its own.
    std::vector<std::pair<std::int64_t, std::int64_t>> plain;  // (offset, numel)
    std::vector<Piece> pieces;
    std::int64_t plain_numel = 0;
    const auto part = partition_numel(options_);
    for (std::size_t j = 0; j < bucket.offsets().size(); ++j) {
      const auto offset = bucket.offsets()[j], numel = bucket.lengths()[j];
      if (4 * numel < options_.byteps_min_compress_bytes) {
        plain.emplace_back(offset, numel);
        plain_numel += numel;
        continue;
      }
      for (std::int64_t first = 0, p = 0; first < numel; first += part, ++p)
        pieces.push_back({bucket.parameter_indices()[j], p, offset + first, std::min(part, numel - first)});
    }

    // A rank's push: each payload's size (u32), the plain gradients, the
    // payloads at their bounds' offsets, so every rank's message has one
    // layout and no size exchange is needed.
    const std::size_t header = 4 * pieces.size();
    std::vector<std::size_t> payload_at(pieces.size());
    std::size_t message = header + 4 * static_cast<std::size_t>(plain_numel);
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      payload_at[i] = message;
      message += padded4(memories_for(pieces[i]).worker->max_payload_bytes(pieces[i].numel));
    }
    auto push = at::zeros({static_cast<std::int64_t>(message)}, at::kByte);
    auto* out = push.data_ptr<std::uint8_t>();
    auto* plain_out = reinterpret_cast<float*>(out + header);
    for (const auto& [offset, numel] : plain) {
      std::memcpy(plain_out, gradients + offset, 4 * static_cast<std::size_t>(numel));
      plain_out += numel;
    }
    std::map<std::string, double> worker_stats;
    std::size_t pushed = 4 * static_cast<std::size_t>(plain_numel);
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      auto& worker = *memories_for(pieces[i]).worker;
      worker.set_learning_rate(lr_);
      const auto used = static_cast<std::uint32_t>(
          worker.compress(gradients + pieces[i].offset, pieces[i].numel, out + payload_at[i]));
      std::memcpy(out + 4 * i, &used, 4);
      pushed += used;
      std::vector<std::pair<std::string, double>> reports;
      worker.report(reports);
      merge_reports(reports, worker_stats);
    }
    env_.clock.add_compute_ns(thread_cpu_ns() - start);

    const auto device = buffer.device();
    auto outgoing = push.to(device);
    auto incoming = at::empty({world * static_cast<std::int64_t>(message)}, outgoing.options());
    // On the wire and in the network model: what a BytePS worker sends, its
    // push and its pull. The pull is counted at the push's size, which it is
    // for every fixed-size format (dithering's varies a little).
    const Communicator::StandsFor push_pull{net::Collective::PushPull, 2.0 * static_cast<double>(pushed)};
    const auto received = Communicator::wait(env_.comm.allgather(outgoing, incoming, push_pull)).cpu().contiguous();
    const auto* messages = received.data_ptr<std::uint8_t>();

    // The server stage, the same on every rank: the plain gradients summed
    // in rank order; each partition's pushes decoded and summed in rank
    // order (server.cc: COPY_FIRST, then SUM_RECV), compressed again with
    // the server's error feedback (ALL_RECV), and decoded as the pull.
    start = thread_cpu_ns();
    std::vector<float> plain_sum(static_cast<std::size_t>(plain_numel));
    for (int r = 0; r < world; ++r) {
      const auto* from = reinterpret_cast<const float*>(messages + r * message + header);
      if (r == 0)
        std::copy_n(from, plain_numel, plain_sum.data());
      else
        for (std::int64_t e = 0; e < plain_numel; ++e) plain_sum[e] = plain_sum[e] + from[e];
    }
    const float* plain_in = plain_sum.data();
    for (const auto& [offset, numel] : plain) {
      std::copy_n(plain_in, numel, gradients + offset);
      plain_in += numel;
    }
    std::map<std::string, double> server_stats;
    std::size_t pulled = 4 * static_cast<std::size_t>(plain_numel);
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      const auto n = pieces[i].numel;
      auto& memories = memories_for(pieces[i]);
      sum_.resize(static_cast<std::size_t>(n));
      for (int r = 0; r < world; ++r) {
        const auto* from = messages + r * message;
        std::uint32_t used = 0;
        std::memcpy(&used, from + 4 * i, 4);
        if (r == 0)
          memories.server->decompress(from + payload_at[i], used, n, 1.0f, sum_.data());
        else
          memories.server->decompress_add(from + payload_at[i], used, n, 1.0f, sum_.data());
      }
      pull_.resize(memories.server->max_payload_bytes(n));
      memories.server->set_learning_rate(lr_);
      const auto used = memories.server->compress(sum_.data(), n, pull_.data());
      pulled += used;
      memories.worker->decompress(pull_.data(), used, n, 1.0f, gradients + pieces[i].offset);
      std::vector<std::pair<std::string, double>> reports;
      memories.server->report(reports);
      merge_reports(reports, server_stats);
    }
    if (options_.byteps_momentum_type == "nesterov") apply_nag(bucket, gradients);
    env_.clock.add_compute_ns(thread_cpu_ns() - start);

    const auto index = bucket.index();
    env_.stats.set_bucket(index, "payload_bytes", static_cast<double>(pushed));
    env_.stats.set_bucket(index, "pull_bytes", static_cast<double>(pulled));
    env_.stats.set_bucket(index, "compression_rate", 4.0 * static_cast<double>(host.numel()) / static_cast<double>(pushed));
    for (const auto& [name, value] : worker_stats)
      env_.stats.set_bucket(index, name, is_norm(name) ? std::sqrt(value) : value);
    for (const auto& [name, value] : server_stats)
      env_.stats.set_bucket(index, "server_" + name, is_norm(name) ? std::sqrt(value) : value);
    buffer.copy_(host);
    return Communicator::completed(buffer);
  }

  void save_state(State& out) const override {
    c10::impl::GenericDict memories(c10::StringType::get(), c10::TensorType::get());
    auto put = [&memories](const std::string& key, const std::uint8_t* data, std::size_t bytes) {
      auto t = at::empty({static_cast<std::int64_t>(bytes)}, at::kByte);
      std::memcpy(t.data_ptr<std::uint8_t>(), data, bytes);
      memories.insert(key, t);
    };
    for (const auto& [key, m] : memories_) {
      for (const auto& [role, compressor] : {std::pair{"worker", m.worker.get()}, {"server", m.server.get()}}) {
        std::vector<std::uint8_t> bytes;
        compressor->save(bytes);
        put(std::string(role) + "/" + key, bytes.data(), bytes.size());
      }
    }
    for (const auto& [parameter, m] : nag_)
      put("nag/" + std::to_string(parameter), reinterpret_cast<const std::uint8_t*>(m.data()), 4 * m.size());
    for (const auto& [key, bytes] : loaded_)  // restored from a checkpoint, not used since
      if (!memories.contains(key)) put(key, bytes.data(), bytes.size());
    out.insert("byteps_memories", memories);
  }

  void load_state(const State& in) override {
    memories_.clear();
    nag_.clear();
    loaded_.clear();
    for (const auto& item : in.at("byteps_memories").toGenericDict()) {
      const auto t = item.value().toTensor().contiguous();
      const auto* data = t.data_ptr<std::uint8_t>();
      loaded_[item.key().toStringRef()] = std::vector<std::uint8_t>(data, data + t.numel());
    }
  }

 private:
  struct Memories {
    std::unique_ptr<Compressor> worker;  // momentum, error feedback, compressor
    std::unique_ptr<Compressor> server;  // error feedback, compressor
  };

  Memories& memories_for(const Piece& piece) {
    const auto key = std::to_string(piece.parameter) + "/" + std::to_string(piece.partition);
    auto& m = memories_[key];
    if (m.worker) return m;
    const auto k = resolve_k(options_.byteps_compressor_k, piece.numel);
    const auto& type = options_.byteps_compressor_type;
    if ((type == "topk" || type == "randomk") && k > piece.numel / 2)
      throw ConfigError("hook.byteps_compressor_k",
                        type + " keeps " + std::to_string(k) + " of a partition of " + std::to_string(piece.numel) +
                            " elements; BytePS allows at most half of a partition (" +
                            std::to_string(piece.numel / 2) + ")");
    // Random streams: a rank's own per partition, and the server's (the
    // same on every rank); with byteps_seed set, randomk ignores them.
    const auto stream = (static_cast<std::uint64_t>(piece.parameter) << 20) ^ static_cast<std::uint64_t>(piece.partition);
    m.worker = make_compressor(options_, piece.numel, (static_cast<std::uint64_t>(env_.rank() + 1) << 44) ^ stream);
    m.server = make_compressor(server_options_, piece.numel, stream);
    restore("worker/" + key, *m.worker);
    restore("server/" + key, *m.server);
    return m;
  }

  void restore(const std::string& key, Compressor& compressor) {
    const auto it = loaded_.find(key);
    if (it == loaded_.end()) return;
    std::size_t pos = 0;
    compressor.load(it->second, pos);
    if (pos != it->second.size())
      throw std::runtime_error("the checkpoint's byteps memories for " + key + " hold " +
                               std::to_string(it->second.size()) + " bytes where this configuration keeps " +
                               std::to_string(pos) + ": it was written with other hook settings");
    loaded_.erase(it);
  }

  // BytePS's MXNet NagAdapter on the pulled gradient of every parameter
  // with fewer *elements* than byteps_min_compress_bytes (its test compares
  // the two as they are: parameters of 16384-65535 elements are compressed
  // with momentum and get this one too): m = mu (m + g); g = g + m.
  void apply_nag(const GradBucket& bucket, float* gradients) {
    const auto mu = static_cast<float>(options_.byteps_momentum_mu);
    for (std::size_t j = 0; j < bucket.offsets().size(); ++j) {
      const auto numel = bucket.lengths()[j];
      if (numel >= options_.byteps_min_compress_bytes) continue;
      const auto parameter = bucket.parameter_indices()[j];
      auto& m = nag_[parameter];
      if (m.empty()) {
        m.assign(static_cast<std::size_t>(numel), 0.0f);
        restore_nag(parameter, m);
      }
      float* g = gradients + bucket.offsets()[j];
      for (std::int64_t e = 0; e < numel; ++e) {
        m[e] = (m[e] + g[e]) * mu;
        g[e] = g[e] + m[e];
      }
    }
  }

  void restore_nag(std::size_t parameter, std::vector<float>& m) {
    const auto it = loaded_.find("nag/" + std::to_string(parameter));
    if (it == loaded_.end()) return;
    if (it->second.size() != 4 * m.size())
      throw std::runtime_error("the checkpoint's byteps NAG memory of parameter " + std::to_string(parameter) +
                               " does not have its size: it was written for another model");
    std::memcpy(m.data(), it->second.data(), it->second.size());
    loaded_.erase(it);
  }

  CompressorOptions options_, server_options_;
  HookEnv& env_;
  double lr_ = 0;
  std::map<std::string, Memories> memories_;  // by "parameter/partition"
  std::map<std::size_t, std::vector<float>> nag_;  // by parameter
  std::map<std::string, std::vector<std::uint8_t>> loaded_;  // from a checkpoint, by key
  std::vector<float> sum_;           // the server's sum of one partition
  std::vector<std::uint8_t> pull_;  // the server's payload of one partition
};

}  // namespace

std::unique_ptr<CommHook> make_byteps_server_hook(const CompressorOptions& options, HookEnv& env) {
  if (options.byteps_compress_on == "device")
    throw ConfigError("hook.byteps_compress_on",
                      "'device' needs hook.byteps_aggregation=allgather: BytePS compresses in host memory");
  if (options.ranks_per_node > 0)
    throw ConfigError("hook.ranks_per_node", "two-level compression needs hook.byteps_aggregation=allgather");
  return std::make_unique<BytepsServerHook>(options, env);
}

}  // namespace commtune
