#include "core/engine/hooks/powersgd.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "core/engine/hooks/numpy_random.h"
#include "core/engine/kernel_bridge.h"

namespace commtune {

Schema<PowerSgdOptions> PowerSgdOptions::schema() {
  using O = PowerSgdOptions;
  return Schema<O>()
      .integer("matrix_approximation_rank", &O::matrix_approximation_rank, {1, 1024}, "",
               "rank r of the approximation M ~ P Q^T (higher: more bytes, better approximation)")
      .integer("start_powerSGD_iter", &O::start_powerSGD_iter, Range::at_least(0), "steps",
               "plain allreduce for this many steps first (must be > 1 with error feedback or warm start)")
      .real("min_compression_rate", &O::min_compression_rate, Range::above(0), "",
            "compress a matrix only when it shrinks it more than this: (n+m)*r*rate < n*m")
      .flag("use_error_feedback", &O::use_error_feedback,
            "add the last step's compression error to the gradient before compressing")
      .flag("warm_start", &O::warm_start, "start each step's power iteration from the last step's Q")
      .real("orthogonalization_epsilon", &O::orthogonalization_epsilon, {0, 1}, "",
            "added to column norms in Gram-Schmidt (0: none; guards all-zero columns)")
      .integer("random_seed", &O::random_seed, {0, 4294967295LL}, "",
               "seed of the random initial Q (numpy RandomState, as PyTorch)")
      .integer("compression_stats_logging_frequency", &O::compression_stats_logging_frequency, Range::at_least(1),
               "steps", "PowerSGDState's reporting period (commtune streams the statistics every step regardless)")
      .flag("batch_tensors_with_same_shape", &O::batch_tensors_with_same_shape,
            "compress matrices of one shape together with batched matrix products");
}

void PowerSgdOptions::validate() const {
  if ((use_error_feedback || warm_start) && start_powerSGD_iter <= 1)
    throw ConfigError("hook.start_powerSGD_iter",
                      std::to_string(start_powerSGD_iter) +
                          " is too early: with use_error_feedback or warm_start it must be > 1, because DDP rebuilds "
                          "its buckets after the first step");
}

namespace {

enum class Variant { LayerWise, Batched };

at::Tensor column_norms(const at::Tensor& col) {
  // What torch.norm(col, dim=1, keepdim=True) dispatches to in each version.
#if TORCH_VERSION_MAJOR >= 2
  return at::linalg_vector_norm(col, 2, {1}, true);
#else
  return at::frobenius_norm(col, {1}, true);
#endif
}

// PyTorch's _orthogonalize on a batch [b, n, r]: modified Gram-Schmidt for
// rank <= 2 or half storage, QR otherwise (their column signs differ).
void orthogonalize_in_place(const at::Tensor& matrices, double epsilon, bool half_storage) {
  const auto cols = matrices.size(2);
  if (cols <= 2 || half_storage) {
    for (std::int64_t i = 0; i < cols; ++i) {
      auto col = matrices.narrow(2, i, 1);
      if (epsilon == 0)
        col.div_(column_norms(col));
      else
        col.div_(column_norms(col) + epsilon);
      if (i + 1 < cols) {
        auto rest = matrices.narrow(2, i + 1, cols - i - 1);
        rest.sub_(at::sum(col * rest, {1}, true) * col);
      }
    }
  } else {
    auto r = at::empty({matrices.size(0), cols, cols}, matrices.options());
    auto q = matrices;
    at::linalg_qr_out(q, r, matrices, "reduced");
  }
}

class PowerSgdHook final : public CommHook {
 public:
  PowerSgdHook(Variant variant, const PowerSgdOptions& o, HookEnv& env)
      : variant_(variant), o_(o), env_(env), rng_(static_cast<std::uint32_t>(o.random_seed)) {}

  bool may_block() const override { return true; }  // three dependent collectives per bucket

  Future run(GradBucket& bucket) override {
    if (bucket.index() == 0) step_ = StepStats{};
    auto input = bucket.buffer();
    if (iter_ < o_.start_powerSGD_iter) {
      if (bucket.is_last()) ++iter_;
      report(bucket, input.numel(), input.numel(), std::nullopt);
      input.div_(env_.world_size());
      return env_.comm.allreduce_sum(input);
    }
    if (variant_ == Variant::LayerWise)
      reduce_layer_wise(bucket);
    else
      reduce_batched(bucket);
    if (!o_.warm_start) {
      p_memory_.clear();
      q_memory_.clear();
    }
    if (bucket.is_last()) ++iter_;
    return Communicator::completed(bucket.buffer());
  }

  void save_state(State& out) const override {
    out.insert("iter", iter_);
    std::vector<std::int64_t> key(rng_.key().begin(), rng_.key().end());
    out.insert("rng_key", at::tensor(key, at::TensorOptions().dtype(at::kLong)));
    out.insert("rng_position", static_cast<std::int64_t>(rng_.position()));
    out.insert("total_numel_before_compression", total_before_);
    out.insert("total_numel_after_compression", total_after_);
    for (const auto& [name, memory] :
         {std::pair{"error_dict", &error_}, {"p_memory_dict", &p_memory_}, std::pair{"q_memory_dict", &q_memory_}}) {
      c10::impl::GenericDict dict(c10::IntType::get(), c10::TensorType::get());
      for (const auto& [b, t] : *memory) dict.insert(static_cast<std::int64_t>(b), t.cpu());
      out.insert(name, dict);
    }
  }

  void load_state(const State& in) override {
    iter_ = in.at("iter").toInt();
    const auto key = in.at("rng_key").toTensor().to(at::kLong).contiguous();
    if (key.numel() != NumpyRandomState::kWords)
      throw std::runtime_error("PowerSGD state: rng_key must hold 624 words");
    std::array<std::uint32_t, NumpyRandomState::kWords> words{};
    for (int i = 0; i < NumpyRandomState::kWords; ++i)
      words[i] = static_cast<std::uint32_t>(key[i].item<std::int64_t>());
    rng_.set_state(words, static_cast<int>(in.at("rng_position").toInt()));
    total_before_ = in.at("total_numel_before_compression").toInt();
    total_after_ = in.at("total_numel_after_compression").toInt();
    for (const auto& [name, memory] :
         {std::pair{"error_dict", &error_}, {"p_memory_dict", &p_memory_}, std::pair{"q_memory_dict", &q_memory_}}) {
      memory->clear();
      for (const auto& item : in.at(name).toGenericDict())
        (*memory)[static_cast<std::size_t>(item.key().toInt())] = item.value().toTensor();
    }
    device_memories_pending_ = true;
  }

 private:
  struct StepStats {
    double before = 0, after = 0, residual_sq = 0;
    bool any_residual = false;
  };

  // Tensors kept in the bucket's dtype (storage); matrix work in `compute`:
  // the storage's, as PyTorch does it, but float32 on the CPU under
  // libtorch 1.13, which has no half-precision matrix products there.
  struct Precision {
    at::ScalarType storage;
    at::ScalarType compute;
    bool half_storage;
    explicit Precision(const at::Tensor& buffer)
        : storage(buffer.scalar_type()),
          compute(TORCH_VERSION_MAJOR < 2 && buffer.is_cpu() && (storage == at::kHalf || storage == at::kBFloat16)
                      ? at::kFloat
                      : storage),
          half_storage(storage == at::kHalf || storage == at::kBFloat16) {}
    at::Tensor up(const at::Tensor& t) const { return t.scalar_type() == compute ? t : t.to(compute); }
    // out = a @ b (batched), computed in `compute`, stored in out's dtype.
    void bmm_into(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b) const {
      if (storage == compute)
        at::bmm_out(const_cast<at::Tensor&>(out), a, b);
      else
        out.copy_(at::bmm(up(a), up(b)));
    }
    void orthogonalize(const at::Tensor& matrices, double epsilon) const {
      if (storage == compute) return orthogonalize_in_place(matrices, epsilon, half_storage);
      auto work = up(matrices);
      orthogonalize_in_place(work, epsilon, half_storage);
      matrices.copy_(work);
    }
  };

  void move_memories_to(const at::Tensor& like) {
    if (!device_memories_pending_) return;
    for (auto* memory : {&error_, &p_memory_, &q_memory_})
      for (auto& [b, t] : *memory) t = t.to(like.device(), like.scalar_type());
    device_memories_pending_ = false;
  }

  static bool fusable(const at::Tensor& a, const at::Tensor& b) {
    return a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat && a.is_contiguous() && b.is_contiguous() &&
           a.device() == b.device();
  }

  // Error feedback in: the bucket becomes gradient + error, and the error
  // buffer keeps that sum for the way out (PyTorch: input.add_(error);
  // input_copy = input.clone()). A bucket without an error yet starts at zero.
  void error_in(std::size_t b, const at::Tensor& input) {
    auto it = error_.find(b);
    if (it == error_.end() || it->second.numel() != input.numel()) {
      error_[b] = input.clone();
      return;
    }
    auto& error = it->second;
    if (fusable(input, error)) {
      kernels::add_into_both(kernel_device(input), input.data_ptr<float>(), error.data_ptr<float>(), input.numel(),
                             kernel_stream(input));
    } else {
      input.add_(error);
      error.copy_(input);
    }
  }

  // Error feedback out: error = (gradient + error) - approximation, which is
  // the bucket now. Returns the new error's norm.
  double error_out(std::size_t b, const at::Tensor& approximation) {
    auto& error = error_.at(b);
    if (fusable(error, approximation))
      return std::sqrt(kernels::subtract_and_square_sum(kernel_device(error), error.data_ptr<float>(),
                                                        approximation.data_ptr<float>(), error.numel(),
                                                        kernel_stream(error)));
    error.sub_(approximation);
    return error.to(at::kFloat).norm().item<double>();
  }

  void reduce_layer_wise(GradBucket& bucket) {
    const auto b = bucket.index();
    auto input = bucket.buffer();
    move_memories_to(input);
    const Precision precision(input);
    if (o_.use_error_feedback) error_in(b, input);

    // Split into matrices worth compressing and the rest, as _should_compress decides.
    std::vector<at::Tensor> matrices, uncompressed;
    std::int64_t p_size = 0, q_size = 0, before = 0, after = 0;
    for (const auto& tensor : bucket.gradients()) {
      auto matrix = tensor.view({tensor.size(0), -1});
      const auto n = matrix.size(0), m = matrix.size(1), r = std::min({n, m, o_.matrix_approximation_rank});
      before += n * m;
      if (static_cast<double>((n + m) * r) * o_.min_compression_rate < static_cast<double>(n * m)) {
        matrices.push_back(matrix);
        p_size += n * r;
        q_size += m * r;
        after += (n + m) * r;
      } else {
        uncompressed.push_back(tensor);
        after += n * m;
      }
    }
    std::vector<at::Tensor> flat;
    for (const auto& t : uncompressed) flat.push_back(t.view({-1}));
    auto uncompressed_memory = flat.empty() ? at::empty({0}, input.options()) : at::cat(flat);

    const bool randomize = !o_.warm_start || p_memory_.count(b) == 0;
    if (randomize) {
      p_memory_[b] = at::empty({p_size}, input.options());
      q_memory_[b] = at::empty({q_size}, input.options());
    }
    auto& p_memory = p_memory_[b];
    auto& q_memory = q_memory_[b];

    // Matrices grouped by shape in order of first appearance; with batching,
    // one stacked batch per shape.
    std::vector<std::pair<at::IntArrayRef, std::vector<at::Tensor>>> by_shape;
    for (const auto& m : matrices) {
      auto it = std::find_if(by_shape.begin(), by_shape.end(), [&](const auto& g) { return g.first == m.sizes(); });
      if (it == by_shape.end())
        by_shape.push_back({m.sizes(), {m}});
      else
        it->second.push_back(m);
    }
    std::vector<at::Tensor> batches, ps, qs;
    std::vector<const std::vector<at::Tensor>*> stacked_from;
    std::int64_t p_at = 0, q_at = 0;
    auto add_batch = [&](at::Tensor batch, const std::vector<at::Tensor>* originals) {
      const auto count = batch.size(0), n = batch.size(1), m = batch.size(2);
      const auto r = std::min({n, m, o_.matrix_approximation_rank});
      ps.push_back(p_memory.narrow(0, p_at, count * n * r).view({count, n, r}));
      qs.push_back(q_memory.narrow(0, q_at, count * m * r).view({count, m, r}));
      p_at += count * n * r;
      q_at += count * m * r;
      batches.push_back(std::move(batch));
      stacked_from.push_back(originals);
    };
    for (const auto& [shape, group] : by_shape) {
      if (o_.batch_tensors_with_same_shape && group.size() > 1)
        add_batch(at::stack(group), &group);
      else
        for (const auto& m : group) add_batch(m.unsqueeze(0), nullptr);
    }

    if (!randomize) {
      for (const auto& q : qs) precision.orthogonalize(q, o_.orthogonalization_epsilon);
    } else {
      // PyTorch: torch.manual_seed(rng.randint(1e9)), then torch.randn per Q, in layout order.
      auto gen = at::detail::createCPUGenerator(static_cast<std::uint64_t>(rng_.randint(1000000000)));
      for (const auto& q : qs) {
        q.copy_(at::randn(q.sizes(), gen, at::TensorOptions().dtype(precision.compute)));
        precision.orthogonalize(q, o_.orthogonalization_epsilon);
      }
    }
    for (std::size_t i = 0; i < batches.size(); ++i) precision.bmm_into(ps[i], batches[i], qs[i]);

    // Uncompressed tensors are summed, then divided; P is summed.
    auto& comm = env_.comm;
    auto uncompressed_done = comm.allreduce_sum(uncompressed_memory);
    auto p_done = comm.allreduce_sum(p_memory);
    Communicator::wait(uncompressed_done);
    uncompressed_memory.div_(env_.world_size());
    std::int64_t at = 0;
    for (const auto& t : uncompressed) {
      t.copy_(uncompressed_memory.narrow(0, at, t.numel()).view_as(t));
      at += t.numel();
    }
    Communicator::wait(p_done);

    for (const auto& p : ps) precision.orthogonalize(p, o_.orthogonalization_epsilon);
    for (std::size_t i = 0; i < batches.size(); ++i) precision.bmm_into(qs[i], batches[i].transpose(1, 2), ps[i]);
    Communicator::wait(comm.allreduce_sum(q_memory));  // Q is summed, then divided
    q_memory.div_(env_.world_size());

    for (std::size_t i = 0; i < batches.size(); ++i) {
      precision.bmm_into(batches[i], ps[i], qs[i].transpose(1, 2));
      if (stacked_from[i])
        for (std::size_t k = 0; k < stacked_from[i]->size(); ++k) (*stacked_from[i])[k].copy_(batches[i][k]);
    }
    report(bucket, before, after, o_.use_error_feedback ? std::optional<double>(error_out(b, input)) : std::nullopt);
  }

  void reduce_batched(GradBucket& bucket) {
    const auto b = bucket.index();
    auto input = bucket.buffer();
    move_memories_to(input);
    const Precision precision(input);
    const auto total = input.numel();
    const auto side = static_cast<std::int64_t>(std::ceil(std::sqrt(static_cast<double>(total))));
    const auto rank = std::min(side, o_.matrix_approximation_rank);
    // The whole bucket as one zero-padded square matrix.
    auto& padded = padded_[b];
    if (!padded.defined() || padded.numel() != side * side || padded.device() != input.device() ||
        padded.scalar_type() != input.scalar_type())
      padded = at::empty({side * side}, input.options());
    padded.narrow(0, 0, total).copy_(input);
    padded.narrow(0, total, side * side - total).zero_();
    if (o_.use_error_feedback) error_in(b, padded);
    auto matrix = padded.view({side, side});

    if (!o_.warm_start || p_memory_.count(b) == 0) {
      p_memory_[b] = at::empty({side, rank}, input.options());
      auto gen = at::detail::createCPUGenerator(static_cast<std::uint64_t>(rng_.randint(1000000000)));
      q_memory_[b] = at::randn({side, rank}, gen, at::TensorOptions().dtype(precision.compute)).to(input.options());
    }
    auto p = p_memory_[b].unsqueeze(0), q = q_memory_[b].unsqueeze(0), m = matrix.unsqueeze(0);
    precision.orthogonalize(q, 0);  // the batched hook orthogonalises Q every step, epsilon 0
    precision.bmm_into(p, m, q);
    Communicator::wait(env_.comm.allreduce_sum(p_memory_[b]));
    precision.orthogonalize(p, 0);
    precision.bmm_into(q, m.transpose(1, 2), p);
    Communicator::wait(env_.comm.allreduce_sum(q_memory_[b]));
    q_memory_[b].div_(env_.world_size());
    precision.bmm_into(m, p, q.transpose(1, 2));
    std::optional<double> residual;
    if (o_.use_error_feedback) residual = error_out(b, padded);
    input.copy_(padded.narrow(0, 0, total));
    report(bucket, total, 2 * side * rank, residual);
  }

  void report(const GradBucket& bucket, std::int64_t before, std::int64_t after, std::optional<double> residual) {
    auto& stats = env_.stats;
    const auto b = bucket.index();
    total_before_ += before;
    total_after_ += after;
    step_.before += static_cast<double>(before);
    step_.after += static_cast<double>(after);
    stats.set_bucket(b, "numel_before", static_cast<double>(before));
    stats.set_bucket(b, "numel_after", static_cast<double>(after));
    stats.set_bucket(b, "compression_rate", static_cast<double>(before) / static_cast<double>(after));
    if (residual) {
      stats.set_bucket(b, "residual_norm", *residual);
      step_.residual_sq += *residual * *residual;
      step_.any_residual = true;
    }
    if (!bucket.is_last()) return;
    stats.set("numel_before", step_.before);
    stats.set("numel_after", step_.after);
    stats.set("compression_rate", step_.before / step_.after);
    stats.set("powersgd_iter", static_cast<double>(iter_));
    stats.set("total_compression_rate",
              total_after_ > 0 ? static_cast<double>(total_before_) / static_cast<double>(total_after_) : 0.0);
    if (step_.any_residual) stats.set("residual_norm", std::sqrt(step_.residual_sq));
  }

  Variant variant_;
  PowerSgdOptions o_;
  HookEnv& env_;
  NumpyRandomState rng_;
  std::int64_t iter_ = 0;
  std::int64_t total_before_ = 0, total_after_ = 0;
  std::map<std::size_t, at::Tensor> error_, p_memory_, q_memory_;
  std::map<std::size_t, at::Tensor> padded_;  // the batched variant's square matrices, reused
  bool device_memories_pending_ = false;
  StepStats step_;
};

}  // namespace

void register_powersgd_hooks(HookRegistry& registry) {
  registry.add<PowerSgdOptions>(
      "powersgd",
      "PowerSGD, layer by layer (powerSGD_hook): each matrix-shaped gradient worth it is sent as rank-r factors P, Q",
      [](const PowerSgdOptions& o, HookEnv& env) {
        return std::make_unique<PowerSgdHook>(Variant::LayerWise, o, env);
      });
  registry.add<PowerSgdOptions>(
      "batched_powersgd",
      "PowerSGD on the whole bucket viewed as one zero-padded square matrix (batched_powerSGD_hook)",
      [](const PowerSgdOptions& o, HookEnv& env) { return std::make_unique<PowerSgdHook>(Variant::Batched, o, env); });
}

}  // namespace commtune
