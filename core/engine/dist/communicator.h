// One rank's connection to the job: the rendezvous store, the process group
// (Gloo on CPU, NCCL on CUDA), and the collectives hooks use. Keeps c10d and
// Gloo headers out of everything else, and counts the bytes each collective
// puts on the wire.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include "core/engine/dist/dist_env.h"
#include "core/tuner/netmodel/network.h"

namespace commtune {

using Future = c10::intrusive_ptr<c10::ivalue::Future>;

enum class CommBackend { Gloo, Nccl };

// A failure of communication itself (a peer died, a collective timed out).
// The launcher uses the distinction to blame the rank that failed first, not
// the ranks that noticed it.
class CommunicationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bytes this rank sent, under the bandwidth-optimal algorithms documented in
// docs/events.md: ring allreduce 2(p-1)/p*n, allgather (p-1)*n_in,
// alltoall (p-1)/p*n_in, broadcast (p-1)/p*n.
struct Traffic {
  std::uint64_t wire_bytes = 0;
  std::uint64_t collectives = 0;
};

// One collective as a hook asked for it: the logical operation and the
// bytes each rank contributed (what the network model needs), whatever the
// backend did underneath.
struct CollectiveRecord {
  net::Collective kind = net::Collective::Allreduce;
  std::int32_t bucket = -1;  // the bucket whose hook issued it; -1 outside any
  net::Group group;          // the ranks it ran among (a split's subgroup, or all)
  double bytes = 0;
  // From issue to completion on this rank, before any link emulation delay:
  // the collective's real cost here (reduction work, software overhead and
  // waiting for peers included). -1 while it is still in flight.
  double seconds = -1;
};

// While alive, collectives this thread issues are attributed to `bucket`.
class BucketScope {
 public:
  explicit BucketScope(std::int32_t bucket);
  ~BucketScope();
  BucketScope(const BucketScope&) = delete;
  BucketScope& operator=(const BucketScope&) = delete;

 private:
  std::int32_t previous_;
};

class Communicator {
 public:
  // Joins the store at MASTER_ADDR:MASTER_PORT and builds the process group.
  // Every blocking step gives up after `timeout`.
  Communicator(const DistEnv& env, CommBackend backend, std::chrono::milliseconds timeout);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  CommBackend backend() const;

  // Sums `tensor` across ranks in place; the future's value is `tensor`.
  // bf16 on Gloo (which lacks bf16 arithmetic) runs as alltoall, a local
  // float32 sum in rank order, and allgather; the caller blocks through the
  // alltoall. Every rank receives bit-identical results. `compute` says
  // whether the rank's compute thread works while the sum runs, or waits for
  // it with nothing else to communicate (a step's only bucket); every rank
  // must pass the same.
  enum class Compute { Busy, Waiting };
  Future allreduce_sum(at::Tensor tensor, Compute compute = Compute::Busy);
  // What a collective stands for where a hook carries another system's
  // traffic with it (BytePS's push and pull, carried by an allgather): the
  // kind and bytes per rank that the step's records, the wire count, the
  // link emulation and the network model take instead of the real ones.
  struct StandsFor {
    net::Collective kind;
    double bytes;
  };
  // Concatenates every rank's `input` into `output` (rank-major). Value: output.
  Future allgather(at::Tensor input, at::Tensor output, std::optional<StandsFor> stands_for = std::nullopt);
  // Sends chunk r of `input` to rank r; `output` receives one chunk from every
  // rank, rank-major. Chunks are equal. Value: output.
  Future alltoall(at::Tensor input, at::Tensor output);
  Future broadcast(at::Tensor tensor, int root);
  // Sums `tensor` into the root's copy (the others' copies are left as they
  // are). Value: tensor.
  Future reduce_sum(at::Tensor tensor, int root);
  // Sends `message` to rank `to` while receiving `received` (same size) from
  // rank `from`; blocks until both are done.
  void send_receive(const at::Tensor& message, int to, at::Tensor received, int from);
  void barrier();

  Traffic traffic() const;
  // The collectives issued since the last call, in issue order.
  std::vector<CollectiveRecord> take_collectives();
  // From now on, every collective completes no earlier than it would on
  // `cluster` (LinkEmulator).
  void emulate_link(const net::Cluster& cluster);

  // A communicator over `members` (ranks of this one, in their order), or
  // null when this rank is not among them. Every rank calls it, with the same
  // members and a `tag` unique to the group. Its traffic and collectives add
  // to this communicator's; link emulation does not apply to it.
  std::unique_ptr<Communicator> split(const std::vector<int>& members, const std::string& tag);

  // An already completed future holding `value`.
  static Future completed(const at::Tensor& value);
  // Waits for a future; failures become CommunicationError. Returns its tensor.
  static at::Tensor wait(const Future& future);
  // Wall time the calling thread has spent blocked in wait(), in nanoseconds:
  // what a hook's time on its thread was not its own work.
  static std::int64_t blocked_ns_on_this_thread();

 private:
  Communicator();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The tensor a collective or hook future carries: a tensor, or the first
// tensor of a list (what c10d work futures hold).
at::Tensor future_tensor(const c10::IValue& value);

// Chains `fn(tensor) -> tensor` after `future`, like torch.futures.Future.then.
// The callback runs on whichever thread completes `future`: it must not block.
// A failed `future` skips `fn` and fails the result.
template <class Fn>
Future then(const Future& future, Fn fn) {
  return future->then(
      [fn = std::move(fn)](c10::ivalue::Future& done) -> c10::IValue { return fn(future_tensor(done.value())); },
      c10::TensorType::get());
}

}  // namespace commtune
