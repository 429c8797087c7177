#include "core/engine/ddp/reducer.h"

#include <ATen/ATen.h>
#include <ATen/ScalarOps.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <chrono>
#include <cmath>

namespace commtune {

namespace {
using steady = std::chrono::steady_clock;
double seconds_since(steady::time_point t) { return std::chrono::duration<double>(steady::now() - t).count(); }
constexpr double kMiB = 1024.0 * 1024.0;
}  // namespace

struct Reducer::GradientReadyHook final : torch::autograd::FunctionPostHook {
  GradientReadyHook(Reducer* reducer, std::size_t index) : reducer(reducer), index(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    reducer->on_gradient_ready(index);
    return outputs;
  }
  Reducer* reducer;
  std::size_t index;
};

Reducer::Reducer(FlatParameters& params, Communicator& comm, CommHook& hook, HookClock& clock, ReducerOptions options)
    : params_(params),
      comm_(comm),
      hook_(hook),
      clock_(clock),
      options_(options),
      copy_scale_(hook.gradient_copy_scale()) {
  const auto n = params_.count();
  std::vector<std::size_t> forward(n);
  for (std::size_t i = 0; i < n; ++i) forward[i] = i;
  if (options_.rebuild_buckets) {
    set_buckets({forward});  // DDP's first iteration: one bucket, parameter order
  } else {
    std::vector<std::int64_t> bytes(n);
    for (std::size_t i = 0; i < n; ++i) bytes[i] = params_.numel(i) * 4;
    auto buckets = assign_buckets(forward, bytes,
                                  {static_cast<std::int64_t>(options_.first_bucket_cap() * kMiB),
                                   static_cast<std::int64_t>(options_.bucket_cap_mb * kMiB)});
    std::reverse(buckets.begin(), buckets.end());  // the last layers' gradients are ready first
    set_buckets(std::move(buckets));
  }
  // Layers can fold only an exact scaling into their arithmetic, and a captured
  // local gradient must be the unscaled one: otherwise gradients arrive as tensors of their own.
  int exponent = 0;
  if (std::frexp(copy_scale_, &exponent) == 0.5 && (copy_scale_ == 1.0 || !options_.capture_local_gradients))
    for (std::size_t i = 0; i < n; ++i)
      destinations_.emplace_back(params_.parameter(i).unsafeGetTensorImpl(),
                                 [this, i] { return gradient_destination(i); });
  for (std::size_t i = 0; i < n; ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(params_.parameter(i));
    if (!accumulator) throw std::invalid_argument("parameter '" + params_.name(i) + "' does not require gradients");
    const auto key = accumulator->add_post_hook(std::make_unique<GradientReadyHook>(this, i));
    autograd_hooks_.emplace_back(std::move(accumulator), key);
  }
  if (hook_.may_block()) hook_thread_ = std::thread([this] { hook_thread_main(); });
}

Reducer::~Reducer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    armed_ = false;
  }
  cv_.notify_all();
  if (hook_thread_.joinable()) hook_thread_.join();
  for (auto& [node, key] : autograd_hooks_) node->del_post_hook(key);
}

void Reducer::set_buckets(std::vector<std::vector<std::size_t>> buckets) {
  std::vector<std::size_t> order;
  for (const auto& b : buckets) order.insert(order.end(), b.begin(), b.end());
  if (order != params_.order()) params_.relayout(order);
  buckets_ = std::move(buckets);
  bucket_of_.assign(params_.count(), 0);
  bucket_start_.clear();
  bucket_numel_.clear();
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    bucket_start_.push_back(params_.offset(buckets_[b].front()));
    std::int64_t numel = 0;
    for (auto i : buckets_[b]) {
      bucket_of_[i] = b;
      numel += params_.numel(i);
    }
    bucket_numel_.push_back(numel);
  }
  grad_views_.clear();
  for (std::size_t i = 0; i < params_.count(); ++i) grad_views_.push_back(params_.grad_view(i));
  if (options_.capture_local_gradients) local_grads_ = at::zeros_like(params_.grads());
}

bool Reducer::begin_step() {
  const bool rebuild = step_ == 1 && options_.rebuild_buckets;
  if (rebuild) rebuild_buckets();
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::size_t i = 0; i < params_.count(); ++i) params_.parameter(i).mutable_grad().reset();
  pending_.assign(buckets_.size(), 0);
  for (std::size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].size();
  param_ready_.assign(params_.count(), false);
  futures_.assign(buckets_.size(), Future());
  errors_.assign(buckets_.size(), nullptr);
  next_launch_ = 0;
  runs_done_ = 0;
  compute_ns_at_start_ = clock_.compute_ns();
  inline_ns_ = 0;
  copied_bytes_ = 0;
  bucket_ready_.assign(buckets_.size(), steady::time_point{});
  bucket_began_.assign(buckets_.size(), steady::time_point{});
  bucket_work_s_.assign(buckets_.size(), 0.0);
  bucket_done_ns_ = std::make_shared<std::vector<std::atomic<std::int64_t>>>(buckets_.size());
  armed_ = true;
  return rebuild;
}

GradientDestination Reducer::gradient_destination(std::size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Not armed: a backward pass the reducer was not prepared for must not write into the buckets.
  if (!armed_ || param_ready_[index]) return {};
  return {params_.grad_view(index), copy_scale_};  // a new view: autograd takes it as .grad without a copy
}

void Reducer::on_gradient_ready(std::size_t index) {
  std::vector<std::size_t> run_now;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!armed_) return;  // a backward pass the reducer was not prepared for
    if (param_ready_[index])
      throw std::runtime_error("parameter '" + params_.name(index) +
                               "' received its gradient twice in one backward pass (reentrant backward or "
                               "checkpointing is not supported)");
    param_ready_[index] = true;
    auto& grad = params_.parameter(index).mutable_grad();
    const auto& view = grad_views_[index];
    if (options_.capture_local_gradients)  // before any scaling on the way into the bucket
      local_grads_.narrow(0, params_.offset(index), params_.numel(index)).copy_(grad.reshape({-1}));
    if (!grad.is_alias_of(view)) {
      if (copy_scale_ != 1.0)
        at::mul_out(const_cast<at::Tensor&>(view), grad, at::native::wrapped_scalar_tensor(copy_scale_));
      else
        view.copy_(grad);
      grad = view;
      copied_bytes_ += static_cast<std::int64_t>(view.nbytes());
    }
    if (step_ == 0) ready_order_.push_back(index);
    if (--pending_[bucket_of_[index]] == 0) {
      bucket_ready_[bucket_of_[index]] = steady::now();
      run_now = launch_ready_buckets();
    }
  }
  for (auto b : run_now) run_bucket(b);
}

std::vector<std::size_t> Reducer::launch_ready_buckets() {
  std::vector<std::size_t> ready;
  while (next_launch_ < buckets_.size() && pending_[next_launch_] == 0) ready.push_back(next_launch_++);
  if (!hook_thread_.joinable() || ready.empty()) return ready;
  queue_.insert(queue_.end(), ready.begin(), ready.end());
  cv_.notify_all();
  return {};
}

void Reducer::run_bucket(std::size_t b) {
  GradBucket bucket = [&] {
    std::lock_guard<std::mutex> lock(mutex_);
    return make_bucket(b);
  }();
  Future future;
  std::exception_ptr error;
  std::int64_t spent = 0;
  const auto began = steady::now();
  const auto blocked_before = Communicator::blocked_ns_on_this_thread();
  double work_s = 0;
  try {
    BucketScope scope(static_cast<std::int32_t>(b));
    const auto start = thread_cpu_ns();
    future = hook_.run(bucket);
    spent = thread_cpu_ns() - start;
    work_s = std::max(0.0, seconds_since(began) -
                               static_cast<double>(Communicator::blocked_ns_on_this_thread() - blocked_before) * 1e-9);
    clock_.add_compute_ns(spent);
    if (future)
      future->addCallback([done = bucket_done_ns_, b](c10::ivalue::Future&) {
        (*done)[b].store(steady::now().time_since_epoch().count(), std::memory_order_relaxed);
      });
  } catch (...) {
    error = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  bucket_began_[b] = began;
  bucket_work_s_[b] = work_s;
  if (!hook_thread_.joinable()) inline_ns_ += spent;
  futures_[b] = std::move(future);
  errors_[b] = error;
  ++runs_done_;
  cv_.notify_all();
}

GradBucket Reducer::make_bucket(std::size_t b) const {
  std::vector<std::int64_t> offsets, lengths;
  std::vector<std::vector<std::int64_t>> shapes;
  std::vector<at::Tensor> parameters;
  std::vector<std::size_t> indices;
  for (auto i : buckets_[b]) {
    indices.push_back(static_cast<std::size_t>(i));
    offsets.push_back(params_.offset(i) - bucket_start_[b]);
    lengths.push_back(params_.numel(i));
    shapes.push_back(params_.shape(i));
    parameters.push_back(params_.parameter(i));
  }
  return GradBucket(b, b + 1 == buckets_.size(), params_.grads().narrow(0, bucket_start_[b], bucket_numel_[b]),
                    std::move(offsets), std::move(lengths), std::move(shapes), std::move(parameters), std::move(indices),
                    copy_scale_);
}

void Reducer::hook_thread_main() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const auto b = queue_.front();
    queue_.pop_front();
    lock.unlock();
    run_bucket(b);
    lock.lock();
  }
}

void Reducer::throw_missing_gradients() const {
  std::string names;
  std::size_t missing = 0;
  for (std::size_t i = 0; i < params_.count(); ++i) {
    if (param_ready_[i]) continue;
    if (missing++ < 8) names += (names.empty() ? "" : ", ") + params_.name(i);
  }
  throw std::runtime_error(std::to_string(missing) + " parameter(s) received no gradient in this step (" + names +
                           (missing > 8 ? ", ..." : "") +
                           "): every trainable parameter must contribute to the loss, as in DDP without "
                           "find_unused_parameters");
}

BackwardReport Reducer::finish_backward(const ReducedRange& on_reduced) {
  const auto start = steady::now();
  BackwardReport report;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    armed_ = false;
    if (next_launch_ < buckets_.size()) {
      // Let launched hooks return before unwinding, so none runs into a destroyed step.
      cv_.wait(lock, [this] { return runs_done_ == next_launch_; });
      throw_missing_gradients();
    }
    cv_.wait(lock, [this] { return runs_done_ == buckets_.size(); });
  }
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    at::Tensor result;
    try {
      if (errors_[b]) std::rethrow_exception(errors_[b]);
      result = Communicator::wait(futures_[b]);
      // A waiter can wake before the future's callbacks have run: then now is when it completed, near enough.
      std::int64_t unset = 0;
      (*bucket_done_ns_)[b].compare_exchange_strong(unset, steady::now().time_since_epoch().count());
    } catch (const CommunicationError& e) {
      throw CommunicationError("reducing bucket " + std::to_string(b) + " of step " + std::to_string(step_) + ": " +
                               e.what());
    }
    auto buffer = params_.grads().narrow(0, bucket_start_[b], bucket_numel_[b]);
    if (result.numel() != buffer.numel())
      throw std::runtime_error("communication hook returned " + std::to_string(result.numel()) +
                               " elements for bucket " + std::to_string(b) + " of " + std::to_string(buffer.numel()));
    // Most hooks reduce in place: their result is the bucket's memory (often as another tensor object).
    if (result.data_ptr() != buffer.data_ptr() || result.scalar_type() != buffer.scalar_type())
      buffer.copy_(result.reshape({-1}));
    if (on_reduced) {
      const auto work_start = steady::now();
      on_reduced(bucket_start_[b], bucket_numel_[b]);
      report.reduced_work_s += seconds_since(work_start);
    }
  }
  report.comm_wait_s = seconds_since(start) - report.reduced_work_s;
  report.hook_compute_s = static_cast<double>(clock_.compute_ns() - compute_ns_at_start_) * 1e-9;
  report.hook_inline_s = static_cast<double>(inline_ns_) * 1e-9;
  report.gradient_copy_bytes = copied_bytes_;
  report.bucket_ready = bucket_ready_;
  report.bucket_began = bucket_began_;
  report.bucket_work_s = bucket_work_s_;
  for (const auto& ns : *bucket_done_ns_) {
    const auto at = ns.load(std::memory_order_relaxed);
    report.bucket_done.push_back(at ? steady::time_point(steady::duration(at)) : steady::time_point{});
  }
  const double share = 2.0 * (comm_.size() - 1) / comm_.size();
  report.uncompressed_wire_bytes = static_cast<std::uint64_t>(share * 4.0 * static_cast<double>(params_.total_numel()));
  ++step_;
  return report;
}

void Reducer::rebuild_buckets() {
  // Every rank must agree on the layout: take rank 0's observed order.
  std::vector<std::int64_t> order(ready_order_.begin(), ready_order_.end());
  auto order_tensor = at::tensor(order, at::TensorOptions().dtype(at::kLong)).to(params_.values().device());
  Communicator::wait(comm_.broadcast(order_tensor, 0));
  order_tensor = order_tensor.cpu();
  std::vector<std::size_t> ready(params_.count());
  std::vector<std::int64_t> bytes(params_.count());
  const auto* rank0_order = order_tensor.data_ptr<std::int64_t>();
  for (std::size_t k = 0; k < ready.size(); ++k) ready[k] = static_cast<std::size_t>(rank0_order[k]);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = params_.numel(i) * 4;
  set_buckets(assign_buckets(ready, bytes,
                             {static_cast<std::int64_t>(options_.first_bucket_cap() * kMiB),
                              static_cast<std::int64_t>(options_.bucket_cap_mb * kMiB)}));
}

nlohmann::json Reducer::layout_json() const {
  auto out = nlohmann::json::array();
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    nlohmann::json names = nlohmann::json::array();
    for (auto i : buckets_[b]) names.push_back(params_.name(i));
    out.push_back({{"index", b}, {"numel", bucket_numel_[b]}, {"bytes", bucket_numel_[b] * 4}, {"parameters", names}});
  }
  return out;
}

NamedTensors Reducer::local_gradients() const {
  if (!local_grads_.defined()) throw std::logic_error("local gradients were not captured (capture_local_gradients)");
  return params_.unflatten(local_grads_);
}

}  // namespace commtune

namespace commtune {

namespace {
at::Tensor indices_tensor(const std::vector<std::size_t>& v) {
  std::vector<std::int64_t> as_int(v.begin(), v.end());
  return at::tensor(as_int, at::TensorOptions().dtype(at::kLong));
}
std::vector<std::size_t> indices_of(const at::Tensor& t) {
  const auto c = t.to(at::kLong).contiguous();
  return {c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel()};
}
}  // namespace

void Reducer::save_state(c10::impl::GenericDict& out) const {
  out.insert("step", step_);
  // A list of Any, not of Tensor: the pickler writes a typed tensor list with a
  // class that torch.load(weights_only=True) refuses.
  c10::impl::GenericList buckets(c10::AnyType::get());
  for (const auto& b : buckets_) buckets.push_back(indices_tensor(b));
  out.insert("buckets", buckets);
  out.insert("ready_order", indices_tensor(ready_order_));
}

void Reducer::load_state(const c10::impl::GenericDict& in) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::vector<std::size_t>> buckets;
  std::size_t total = 0;
  for (const auto& b : in.at("buckets").toList()) {
    buckets.push_back(indices_of(b.get().toTensor()));
    total += buckets.back().size();
  }
  if (total != params_.count())
    throw std::runtime_error("the checkpoint's buckets hold " + std::to_string(total) + " parameters, the model has " +
                             std::to_string(params_.count()));
  set_buckets(std::move(buckets));
  step_ = in.at("step").toInt();
  ready_order_ = indices_of(in.at("ready_order").toTensor());
}

}  // namespace commtune
