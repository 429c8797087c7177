#include "core/engine/dist/communicator.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "core/engine/dist/c10d_compat.h"
#include "core/engine/dist/link_emulator.h"
#include "kernels/kernels.h"

namespace commtune {

namespace {

std::uint64_t bytes_of(const at::Tensor& t) { return static_cast<std::uint64_t>(t.numel()) * t.element_size(); }

thread_local std::int32_t current_bucket = -1;

}  // namespace

BucketScope::BucketScope(std::int32_t bucket) : previous_(current_bucket) { current_bucket = bucket; }
BucketScope::~BucketScope() { current_bucket = previous_; }

// What every communicator of a rank shares (the world's and its subgroups'):
// the traffic counters and the log of collectives a step reports.
struct CollectiveLedger {
  std::mutex mutex;
  std::vector<CollectiveRecord> log;
  std::vector<std::chrono::steady_clock::time_point> issued;
  std::uint64_t base = 0;  // sequence number of log[0]
  std::atomic<std::uint64_t> wire_bytes{0};
  std::atomic<std::uint64_t> collectives{0};
};

struct Communicator::Impl {
  DistEnv env;
  CommBackend backend;
  std::chrono::milliseconds timeout{0};
  // Declared before the group: destroyed after it, so no collective the
  // group finishes while shutting down finds the ledger or the emulator gone.
  std::shared_ptr<CollectiveLedger> ledger = std::make_shared<CollectiveLedger>();
  std::unique_ptr<LinkEmulator> emulator;
  net::Group members;  // of the job's ranks: all, or a split's subgroup
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<compat::ProcessGroupBase> group;

  // Logs a collective being issued; returns its sequence number.
  std::uint64_t record(net::Collective kind, const at::Tensor& payload) {
    return record(kind, static_cast<double>(bytes_of(payload)));
  }
  std::uint64_t record(net::Collective kind, double bytes) {
    std::lock_guard<std::mutex> lock(ledger->mutex);
    ledger->log.push_back({kind, current_bucket, members, bytes});
    ledger->issued.push_back(std::chrono::steady_clock::now());
    return ledger->base + ledger->log.size() - 1;
  }
  // Called where the real collective completes, before its future does (so
  // before anyone waiting on it can take the log).
  void finished(std::uint64_t sequence) {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(ledger->mutex);
    if (sequence < ledger->base || sequence >= ledger->base + ledger->log.size()) return;
    const auto i = sequence - ledger->base;
    ledger->log[i].seconds = std::chrono::duration<double>(now - ledger->issued[i]).count();
  }
  Future completed_now(std::uint64_t sequence, const at::Tensor& value) {
    finished(sequence);
    return completed(value);
  }
  // What a collective hands back: its own future, or one the emulated link holds back.
  Future issued(Future future, net::Collective kind, const at::Tensor& payload) {
    return issued(std::move(future), kind, static_cast<double>(bytes_of(payload)));
  }
  Future issued(Future future, net::Collective kind, double bytes) {
    return emulator ? emulator->delay(future, kind, bytes) : future;
  }

  void count(double bytes) {
    ledger->wire_bytes.fetch_add(static_cast<std::uint64_t>(bytes), std::memory_order_relaxed);
    ledger->collectives.fetch_add(1, std::memory_order_relaxed);
  }
  void build_group();
  double share() const { return static_cast<double>(env.world_size - 1) / env.world_size; }

  // Work futures hold a list of tensors; ours hold the one tensor. c10's
  // then() runs the callback on failure too: value() rethrows the failure
  // into the child future, so a failed collective never looks like a result.
  Future to_tensor_future(const c10::intrusive_ptr<c10d::Work>& work, at::Tensor result, std::uint64_t sequence) {
    return work->getFuture()->then(
        [this, result = std::move(result), sequence](c10::ivalue::Future& done) -> c10::IValue {
          done.value();
          finished(sequence);
          return result;
        },
        c10::TensorType::get());
  }

  Future emulated_bf16_allreduce(at::Tensor tensor, std::uint64_t sequence);

  // Whether a float sum of `tensor` goes as two halves (Communicator::allreduce_sum).
  bool split_allreduce(const at::Tensor& tensor) const {
    constexpr std::int64_t kMinBytes = 256 * 1024;  // below this, one collective's latency wins
    return backend == CommBackend::Gloo && env.world_size == 2 && tensor.is_contiguous() &&
           tensor.is_floating_point() && static_cast<std::int64_t>(bytes_of(tensor)) >= kMinBytes;
  }
};

// The process group over `store`, for this rank of `env`.
void Communicator::Impl::build_group() {
  try {
    if (backend == CommBackend::Gloo) {
#if defined(COMMTUNE_WITH_GLOO)
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface)
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(iface));
      else if (env.is_loopback())
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      else
        options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, options);
#else
      throw std::runtime_error(
          "this build of commtune has no Gloo support (built without gloo headers): use device=cuda");
#endif
    } else {
#if defined(COMMTUNE_WITH_NCCL)
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank, env.world_size, options);
#else
      throw std::runtime_error("this build of commtune has no NCCL support (libtorch without CUDA)");
#endif
    }
  } catch (const CommunicationError&) {
    throw;
  } catch (const std::exception& e) {
    throw CommunicationError("rank " + std::to_string(env.rank) + " could not build the process group: " + e.what());
  }
}

Communicator::Communicator(const DistEnv& env, CommBackend backend, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->env = env;
  impl_->backend = backend;

  try {
    if (!env.store_file.empty()) {
      // A local run: the store is a file in the launcher's private folder, so
      // nothing listens on a network port for the rendezvous (a TCPStore in
      // libtorch 1.13 listens on every interface).
      auto store = c10::make_intrusive<c10d::FileStore>(env.store_file, env.world_size);
      store->setTimeout(timeout);
      impl_->store = store;
    } else {
      c10d::TCPStoreOptions store_options;
      store_options.port = static_cast<std::uint16_t>(env.master_port);
      store_options.isServer = env.rank == 0 && !env.agent_hosts_store;
      store_options.numWorkers = env.world_size;
      store_options.waitWorkers = false;
      store_options.timeout = timeout;
      impl_->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options);
    }
  } catch (const std::exception& e) {
    const auto where = env.store_file.empty() ? env.master_addr + ":" + std::to_string(env.master_port) : env.store_file;
    throw CommunicationError("rank " + std::to_string(env.rank) + " could not join the store at " + where + ": " +
                             e.what());
  }

  impl_->timeout = timeout;
  impl_->build_group();
}

Communicator::Communicator() : impl_(std::make_unique<Impl>()) {}
Communicator::~Communicator() = default;

std::unique_ptr<Communicator> Communicator::split(const std::vector<int>& members, const std::string& tag) {
  const auto me = std::find(members.begin(), members.end(), rank());
  if (me == members.end()) return nullptr;
  std::unique_ptr<Communicator> sub(new Communicator());
  sub->impl_->env = impl_->env;
  sub->impl_->env.rank = static_cast<int>(me - members.begin());
  sub->impl_->env.world_size = static_cast<int>(members.size());
  sub->impl_->backend = impl_->backend;
  sub->impl_->timeout = impl_->timeout;
  sub->impl_->ledger = impl_->ledger;
  // As ranks of the whole job: `members` are this communicator's ranks, so a
  // split of a split strides by both. Irregular sets count by their span.
  const int outer_stride = impl_->members.whole() ? 1 : impl_->members.stride;
  const auto [low, high] = std::minmax_element(members.begin(), members.end());
  const int count = static_cast<int>(members.size());
  const int stride = count > 1 ? (*high - *low + count - 2) / (count - 1) : 1;
  sub->impl_->members = count == size() ? impl_->members : net::Group{count, outer_stride * stride};
  sub->impl_->store = c10::make_intrusive<c10d::PrefixStore>(tag, impl_->store);
  sub->impl_->build_group();
  return sub;
}

int Communicator::rank() const { return impl_->env.rank; }
int Communicator::size() const { return impl_->env.world_size; }
CommBackend Communicator::backend() const { return impl_->backend; }

Future Communicator::allreduce_sum(at::Tensor tensor, Compute compute) {
  const auto sequence = impl_->record(net::Collective::Allreduce, tensor);
  if (size() == 1) return impl_->completed_now(sequence, tensor);
  if (!compat::kGlooSumsBf16 && tensor.scalar_type() == at::kBFloat16 && impl_->backend == CommBackend::Gloo)
    return impl_->issued(impl_->emulated_bf16_allreduce(tensor, sequence), net::Collective::Allreduce, tensor);
  impl_->count(2.0 * impl_->share() * bytes_of(tensor));
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  if (compute == Compute::Waiting && impl_->split_allreduce(tensor)) {
    // Between two ranks every element's sum is a + b whichever way the buffer
    // is cut, so the halves go as two collectives that Gloo's two worker
    // threads move at once: 42 MB in 27.5 ms instead of 35.2 ms, 4 MB in 2.6
    // instead of 3.2 (two processes on two cores). Only while the rank's
    // compute waits with no other collective on Gloo's threads (the caller
    // says so, alike on every rank: ranks must issue the same collectives):
    // during backward the second thread takes a core from it, and behind an
    // earlier bucket one half waits anyway (the 1M MLP's two buckets, split:
    // 10.6 ms a step instead of 8.5). With
    // more ranks a cut would change the order in which Gloo's ring adds each
    // element, and the sums would no longer be PyTorch's bit for bit.
    const auto flat = tensor.view({-1});
    const auto half = (flat.numel() + 1) / 2;
    c10::List<c10::intrusive_ptr<c10::ivalue::Future>> halves(c10::FutureType::create(c10::ListType::ofTensors()));
    for (const auto& part : {flat.narrow(0, 0, half), flat.narrow(0, half, flat.numel() - half)}) {
      std::vector<at::Tensor> tensors{part};
      halves.push_back(impl_->group->allreduce(tensors, options)->getFuture());
    }
    auto both = c10::collectAll(halves)->then(
        [impl = impl_.get(), tensor, sequence](c10::ivalue::Future& done) -> c10::IValue {
          for (const auto& one : done.value().toList()) one.get().toFuture()->value();  // rethrows a failure
          impl->finished(sequence);
          return tensor;
        },
        c10::TensorType::get());
    return impl_->issued(std::move(both), net::Collective::Allreduce, tensor);
  }
  std::vector<at::Tensor> tensors{tensor};
  return impl_->issued(impl_->to_tensor_future(impl_->group->allreduce(tensors, options), tensor, sequence),
                       net::Collective::Allreduce, tensor);
}

Future Communicator::Impl::emulated_bf16_allreduce(at::Tensor tensor, std::uint64_t sequence) {
  // PyTorch 1.13's Gloo has no bf16: it moves the bytes (viewed as fp16, which
  // it supports) and never does arithmetic on them; the sum happens here, in
  // float32, in rank order.
  const int p = env.world_size;
  const int64_t n = tensor.numel();
  const int64_t chunk = (n + p - 1) / p;
  auto padded = at::zeros({chunk * p}, tensor.options());
  padded.narrow(0, 0, n).copy_(tensor.reshape({-1}));
  auto received = at::empty_like(padded);
  {
    auto in = padded.view(at::kHalf), out = received.view(at::kHalf);
    std::vector<int64_t> equal_splits;
    count(share() * bytes_of(padded));
    Communicator::wait(group->alltoall_base(out, in, equal_splits, equal_splits)->getFuture());
  }
  auto mine = at::empty({chunk}, tensor.options());
  const auto device = tensor.is_cuda() ? kernels::Device::Cuda : kernels::Device::Cpu;
  kernels::sum_bf16_rows(device, reinterpret_cast<const std::uint16_t*>(received.data_ptr()), p, chunk,
                         reinterpret_cast<std::uint16_t*>(mine.data_ptr()));
  auto gathered = at::empty_like(padded);
  std::vector<std::vector<at::Tensor>> outputs{gathered.view(at::kHalf).chunk(p)};
  std::vector<at::Tensor> inputs{mine.view(at::kHalf)};
  count((p - 1) * static_cast<double>(bytes_of(mine)));
  auto work = group->allgather(outputs, inputs);
  return work->getFuture()->then(
      [this, tensor, gathered, n, sequence](c10::ivalue::Future& done) -> c10::IValue {
        done.value();  // rethrows a failed allgather
        tensor.reshape({-1}).copy_(gathered.narrow(0, 0, n));
        finished(sequence);
        return tensor;
      },
      c10::TensorType::get());
}

Future Communicator::allgather(at::Tensor input, at::Tensor output, std::optional<StandsFor> stands_for) {
  if (output.numel() != input.numel() * size())
    throw std::invalid_argument("allgather: output must hold world_size * input.numel() elements");
  const auto as = stands_for.value_or(StandsFor{net::Collective::Allgather, static_cast<double>(bytes_of(input))});
  const auto sequence = impl_->record(as.kind, as.bytes);
  if (size() == 1) {
    output.copy_(input.reshape(output.sizes()));
    return impl_->completed_now(sequence, output);
  }
  impl_->count(stands_for ? as.bytes : (size() - 1) * as.bytes);
  std::vector<std::vector<at::Tensor>> outputs{output.reshape({-1}).chunk(size())};
  std::vector<at::Tensor> inputs{input.reshape({-1})};
  return impl_->issued(impl_->to_tensor_future(impl_->group->allgather(outputs, inputs), output, sequence),
                       as.kind, as.bytes);
}

Future Communicator::alltoall(at::Tensor input, at::Tensor output) {
  if (input.numel() % size() != 0 || output.numel() != input.numel())
    throw std::invalid_argument("alltoall: input and output must have equal sizes divisible by world_size");
  const auto sequence = impl_->record(net::Collective::Alltoall, input);
  if (size() == 1) {
    output.copy_(input);
    return impl_->completed_now(sequence, output);
  }
  impl_->count(impl_->share() * bytes_of(input));
  std::vector<int64_t> equal_splits;
  return impl_->issued(
      impl_->to_tensor_future(impl_->group->alltoall_base(output, input, equal_splits, equal_splits), output, sequence),
      net::Collective::Alltoall, input);
}

Future Communicator::broadcast(at::Tensor tensor, int root) {
  const auto sequence = impl_->record(net::Collective::Broadcast, tensor);
  if (size() == 1) return impl_->completed_now(sequence, tensor);
  impl_->count(impl_->share() * bytes_of(tensor));
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  return impl_->issued(impl_->to_tensor_future(impl_->group->broadcast(tensors, options), tensor, sequence),
                       net::Collective::Broadcast, tensor);
}

Future Communicator::reduce_sum(at::Tensor tensor, int root) {
  const auto sequence = impl_->record(net::Collective::Reduce, tensor);
  if (size() == 1) return impl_->completed_now(sequence, tensor);
  impl_->count(impl_->share() * bytes_of(tensor));
  std::vector<at::Tensor> tensors{tensor};
  c10d::ReduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  options.rootRank = root;
  return impl_->issued(impl_->to_tensor_future(impl_->group->reduce(tensors, options), tensor, sequence),
                       net::Collective::Reduce, tensor);
}

void Communicator::send_receive(const at::Tensor& message, int to, at::Tensor received, int from) {
  const auto sequence = impl_->record(net::Collective::SendRecv, message);
  if (size() == 1) {
    received.copy_(message);
    impl_->finished(sequence);
    return;
  }
  impl_->count(static_cast<double>(bytes_of(message)));
  // Point-to-point work has no future on Gloo (1.13): wait on the work
  // itself. Link emulation does not delay these.
  std::vector<at::Tensor> out{message}, in{received};
  try {
    auto sent = impl_->group->send(out, to, 0);
    auto arrived = impl_->group->recv(in, from, 0);
    sent->wait();
    arrived->wait();
  } catch (const std::exception& e) {
    throw CommunicationError("exchange with ranks " + std::to_string(to) + " and " + std::to_string(from) +
                             " failed: " + e.what());
  }
  impl_->finished(sequence);
}

void Communicator::barrier() {
  if (size() == 1) return;
  try {
    impl_->group->barrier()->wait();
  } catch (const std::exception& e) {
    throw CommunicationError(std::string("barrier failed: ") + e.what());
  }
}

Traffic Communicator::traffic() const {
  return {impl_->ledger->wire_bytes.load(std::memory_order_relaxed),
          impl_->ledger->collectives.load(std::memory_order_relaxed)};
}

std::vector<CollectiveRecord> Communicator::take_collectives() {
  auto& ledger = *impl_->ledger;
  std::lock_guard<std::mutex> lock(ledger.mutex);
  ledger.base += ledger.log.size();
  ledger.issued.clear();
  return std::exchange(ledger.log, {});
}

void Communicator::emulate_link(const net::Cluster& cluster) {
  impl_->emulator = std::make_unique<LinkEmulator>(cluster);
}

Future Communicator::completed(const at::Tensor& value) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
  future->markCompleted(value);
  return future;
}

namespace {
thread_local std::int64_t t_blocked_ns = 0;
}  // namespace

std::int64_t Communicator::blocked_ns_on_this_thread() { return t_blocked_ns; }

at::Tensor Communicator::wait(const Future& future) {
  if (!future->completed()) {
    const auto start = std::chrono::steady_clock::now();
    future->wait();  // c10 futures do not throw here; the error is inspected below
    t_blocked_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  }
  if (future->hasError()) throw CommunicationError(future->tryRetrieveErrorMessage());
  return future_tensor(future->value());
}

at::Tensor future_tensor(const c10::IValue& value) {
  if (value.isTensor()) return value.toTensor();
  if (value.isTensorList()) return value.toTensorList().get(0);
  if (value.isList()) return value.toList().get(0).toTensor();
  throw std::runtime_error("a communication hook's future must hold a tensor, got " + value.tagKind());
}

}  // namespace commtune
