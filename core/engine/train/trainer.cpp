#include "core/engine/train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>
#include <tuple>

#include "core/engine/catalog.h"
#include "core/engine/dist/devices.h"
#include "core/tuner/io/error_text.h"
#include "core/tuner/io/output_file.h"
#include "core/engine/io/pickle_file.h"
#include "core/engine/models/weights_file.h"
#include "core/tuner/store/run_metrics.h"
#include "core/engine/train/checkpoint.h"

namespace commtune {

namespace {

using steady = std::chrono::steady_clock;

// ATen's intra-op threads, and the BLAS library's: MKL (the PyPI wheels')
// takes ATen's count, OpenBLAS (Debian's) sizes its pool to the machine
// regardless of ATen, so two ranks on two cores would otherwise run four
// matrix-multiply threads. MKL first gets its conditional numerical
// reproducibility mode (MKL_CBWR=AUTO, unless the environment chose one):
// without it its matrix products round differently for operands at other
// addresses, and a bucket's slices are not where PyTorch's own gradients are.
// Before any MKL call: MKL reads the variable once, when it starts.
void set_up_math_libraries(int threads, bool deterministic) {
  ::setenv("MKL_CBWR", "AUTO", /*overwrite=*/0);
  if (deterministic) {
    // As PyTorch's torch.use_deterministic_algorithms(True, warn_only=True) with cuDNN's deterministic
    // algorithms: cuBLAS reads its workspace setting when its first handle is made, after this.
    ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
    at::globalContext().setDeterministicCuDNN(true);
    at::globalContext().setBenchmarkCuDNN(false);
  }
  at::set_num_threads(threads);
  using SetThreads = void (*)(int);
  if (auto set_blas = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    set_blas(threads);
}

// The first batch through the model: a model (from a file) that cannot take
// the dataset's samples is a configuration error naming both shapes, in one line.
at::Tensor first_forward(Model& model, const at::Tensor& input, const DataSpec& data) {
  const auto refused = [&](const std::string& what) {
    const auto batch = c10::str(input.sizes()) + " of the dataset's " + data.describe();
    // An exception the model's own code raised says what the user wrote: it leads.
    if (const auto raised = raised_by_model(what); !raised.empty())
      return ConfigError("model", "the model's forward raised: " + raised + ", on a batch " + batch);
    return ConfigError("model", "the model cannot take a batch " + batch + ": " + one_line_error(what));
  };
  try {
    return model.forward(input);
  } catch (const c10::OutOfMemoryError&) {
    throw;
  } catch (const c10::Error& e) {
    throw refused(e.what_without_backtrace());
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {  // the TorchScript interpreter's errors
    throw refused(e.what());
  }
}

double seconds_between(steady::time_point a, steady::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// DDP's broadcast_buffers: rank 0's buffers (e.g. BatchNorm statistics)
// before every forward. Their bytes travel, as PyTorch's coalesced broadcast
// sends each buffer in its own dtype: a complex rotary table, a float64
// statistic or an int64 counter past 2^24 arrive bit for bit.
class BufferSync {
 public:
  explicit BufferSync(NamedTensors buffers) : buffers_(std::move(buffers)) {
    for (const auto& [name, b] : buffers_) bytes_ += static_cast<std::int64_t>(b.nbytes());
  }
  void run(Communicator& comm) {
    if (bytes_ == 0 || comm.size() == 1) return;
    if (!checked_) {  // with one rank nothing travels, and any buffer will do
      for (const auto& [name, b] : buffers_)
        if (b.is_quantized() || b.layout() != at::kStrided)
          throw ConfigError("model", "buffer '" + name + "' is a " + std::string(c10::toString(b.scalar_type())) +
                                         " tensor of layout " + c10::str(b.layout()) +
                                         "; commtune broadcasts dense buffers only (DDP's broadcast_buffers)");
      checked_ = true;
    }
    auto packed = at::empty({bytes_}, at::TensorOptions().dtype(at::kByte).device(buffers_.front().second.device()));
    std::int64_t offset = 0;
    for (const auto& [name, b] : buffers_) {
      const auto n = static_cast<std::int64_t>(b.nbytes());
      if (n > 0) packed.narrow(0, offset, n).copy_(bytes_of(b.resolve_conj().resolve_neg().contiguous()));
      offset += n;
    }
    Communicator::wait(comm.broadcast(packed, 0));
    offset = 0;
    for (auto& [name, b] : buffers_) {
      const auto n = static_cast<std::int64_t>(b.nbytes());
      if (n > 0) {
        const bool direct = b.is_contiguous() && !b.is_conj() && !b.is_neg();
        auto target = direct ? b : at::empty(b.sizes(), b.options());
        bytes_of(target).copy_(packed.narrow(0, offset, n));
        if (!target.is_same(b)) b.copy_(target);
      }
      offset += n;
    }
  }

 private:
  // A contiguous tensor's storage as bytes, a view of it.
  static at::Tensor bytes_of(const at::Tensor& contiguous) { return contiguous.reshape({-1}).view(at::kByte); }

  NamedTensors buffers_;
  std::int64_t bytes_ = 0;
  bool checked_ = false;
};

// For the first debug.dump_grads_steps steps: each rank's gradients before
// and after reduction, and the hook's state after the step (what a stateful
// hook carries into the next one).
void dump_step(const DebugOptions& debug, int rank, std::int64_t step, const Reducer& reducer,
               const FlatParameters& flat, const CommHook& hook) {
  std::filesystem::create_directories(debug.dump_dir);
  c10::impl::GenericDict dump(c10::StringType::get(), c10::AnyType::get());
  for (auto& [name, t] : reducer.local_gradients()) dump.insert("local/" + name, t.cpu());
  for (auto& [name, t] : flat.unflatten(flat.grads())) dump.insert("reduced/" + name, t.cpu());
  CommHook::State state(c10::StringType::get(), c10::AnyType::get());
  hook.save_state(state);
  if (!state.empty()) dump.insert("hook", state);
  const auto file = std::filesystem::path(debug.dump_dir) /
                    ("grads-rank" + std::to_string(rank) + "-step" + std::to_string(step) + ".pt");
  write_pickle_file(file.string(), dump);
}

// What the network model needs from a step: each bucket's collectives
// (bytes and calls per kind) and when its gradients were ready, counted from
// the start of backward; collectives outside any bucket count for the step.
void add_communication_stats(events::StepRecord& record, const std::vector<CollectiveRecord>& collectives,
                             const BackwardReport& report, steady::time_point backward_start) {
  struct Totals {
    double bytes = 0, calls = 0, seconds = 0;
  };
  std::map<std::tuple<std::int32_t, net::Collective, net::Group>, Totals> totals;
  for (const auto& c : collectives) {
    auto& t = totals[{c.bucket, c.kind, c.group}];
    t.bytes += c.bytes;
    t.calls += 1;
    t.seconds += std::max(0.0, c.seconds);
  }
  for (const auto& [key, t] : totals) {
    const auto& [bucket, kind, group] = key;
    const auto prefix = net::collective_stat_prefix(kind, group);
    for (const auto& [name, value] : {std::pair{".bytes", t.bytes}, {".calls", t.calls}, {".seconds", t.seconds}}) {
      if (bucket < 0)
        record.stats.push_back({prefix + name, value});
      else
        record.bucket_stats.push_back({static_cast<std::uint32_t>(bucket), prefix + name, value});
    }
  }
  for (std::size_t b = 0; b < report.bucket_ready.size(); ++b)
    if (report.bucket_ready[b] != steady::time_point{})
      record.bucket_stats.push_back({static_cast<std::uint32_t>(b), "ready_s",
                                     std::max(0.0, seconds_between(backward_start, report.bucket_ready[b]))});
  for (std::size_t b = 0; b < std::min(report.bucket_began.size(), report.bucket_done.size()); ++b)
    if (report.bucket_began[b] != steady::time_point{} && report.bucket_done[b] != steady::time_point{}) {
      record.bucket_stats.push_back({static_cast<std::uint32_t>(b), "chain_s",
                                     std::max(0.0, seconds_between(report.bucket_began[b], report.bucket_done[b]))});
      record.bucket_stats.push_back({static_cast<std::uint32_t>(b), "hook_work_s", report.bucket_work_s.at(b)});
    }
  record.stats.push_back({"hook_inline_s", report.hook_inline_s});
}

// What a step produced that is not finite, on this rank: its loss, or a
// gradient norm the hook computed anyway (PowerSGD's residual_norm, error
// feedback's ef_error_norm). Checking these costs nothing; a pass over every
// gradient would not, and a non-finite gradient shows in the next step's loss.
std::optional<std::pair<std::string, double>> nonfinite_in_step(
    double loss, const std::vector<std::pair<std::string, double>>& hook_stats) {
  if (!std::isfinite(loss)) return std::pair<std::string, double>{"loss", loss};
  static const std::string norm_suffix = "_norm";
  for (const auto& [name, value] : hook_stats)
    if (!std::isfinite(value) && name.size() > norm_suffix.size() &&
        name.compare(name.size() - norm_suffix.size(), norm_suffix.size(), norm_suffix) == 0)
      return std::pair{name, value};
  return std::nullopt;
}

nlohmann::json parameter_list(const FlatParameters& flat) {
  auto list = nlohmann::json::array();
  for (std::size_t i = 0; i < flat.count(); ++i) list.push_back({{"name", flat.name(i)}, {"shape", flat.shape(i)}});
  return list;
}

// This machine's link, measured before training: a float32 allreduce at two
// sizes (the best of five tries each, after one to warm up). The network model
// replaces the transfer time it implies with the target link's
// (docs/network-model.md); null with one rank.
nlohmann::json probe_link(Communicator& comm, const c10::Device& device) {
  if (comm.size() < 2) return nullptr;
  nlohmann::json bytes = nlohmann::json::array(), seconds = nlohmann::json::array(),
                 attempts = nlohmann::json::array();
  for (const std::int64_t numel : {std::int64_t{16384}, std::int64_t{1048576}}) {  // 64 KiB, 4 MiB
    auto tensor = at::zeros({numel}, at::TensorOptions().dtype(at::kFloat).device(device));
    std::vector<double> timed;
    for (int attempt = 0; attempt < 6; ++attempt) {
      const auto start = steady::now();
      Communicator::wait(comm.allreduce_sum(tensor));
      if (attempt > 0) timed.push_back(seconds_between(start, steady::now()));
    }
    bytes.push_back(4 * numel);
    seconds.push_back(*std::min_element(timed.begin(), timed.end()));
    attempts.push_back(timed);
  }
  comm.take_collectives();  // not the run's
  return {{"bytes", bytes}, {"seconds", seconds}, {"attempts", attempts}};
}

// The run itself, once the process group stands.
bool train_with(const RunConfig& config, const DistEnv& env, const c10::Device& device, int threads, Communicator& comm,
                const nlohmann::json& link_probe, events::EventWriter* events) {
  const auto run_start = steady::now();
  auto& cat = catalog();
  auto dataset = cat.datasets.create(config.data, DataContext{config.run.seed});
  ShardedLoader loader(*dataset, LoaderOptions::schema().read(config.data, "data"), env.rank, env.world_size,
                       config.run.seed);

  at::manual_seed(static_cast<std::uint64_t>(config.run.seed));
  auto model = cat.models.create(config.model, dataset->spec());
  model->to(device);
  model->train(true);
  if (!config.weights.init.empty()) {
    NamedTensors weights;
    try {
      weights = read_weights(config.weights.init);
    } catch (const std::runtime_error& e) {
      throw ConfigError("weights.init", e.what());
    }
    load_weights_into(model->named_parameters(), weights, config.weights.init, "weights.init");
  }

  FlatParameters flat(model->named_parameters());
  Communicator::wait(comm.broadcast(flat.values(), 0));  // DDP starts every rank from rank 0's weights
  BufferSync buffers(model->named_buffers());
  if (env.rank == 0 && !config.weights.save_initial.empty())
    save_weights(config.weights.save_initial, flat.unflatten(flat.values()));
  if (config.debug.init_noise > 0) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(config.run.seed) * 1000003u +
                                                              static_cast<std::uint64_t>(env.rank));
    const auto noise = at::randn({flat.total_numel()}, generator, at::TensorOptions().dtype(at::kFloat));
    flat.values().add_(noise.to(flat.values().device()), config.debug.init_noise);
  }

  HookStats stats;
  HookClock clock;
  HookEnv hook_env{comm, stats, clock};
  auto hook = make_hook(cat.hooks, config.hook, hook_env);
  ReducerOptions reducer_options = config.ddp;
  reducer_options.capture_local_gradients = config.debug.dump_grads_steps > 0;
  Reducer reducer(flat, comm, *hook, clock, reducer_options);
  const auto optimizer_common = OptimizerCommon::schema().read(config.optimizer, "optimizer");
  auto optimizer = cat.optimizers.create(config.optimizer, flat, optimizer_common);

  TrainingState state{flat, reducer, *optimizer, *hook, loader};
  std::int64_t first_step = 0;
  if (!config.checkpoint.resume.empty()) {
    first_step = state.load(config.checkpoint.resume, env.rank, env.world_size);
    if (first_step > config.run.steps)
      throw ConfigError("steps", "is " + std::to_string(config.run.steps) + ", but checkpoint.resume continues from step " +
                                     std::to_string(first_step) + ": set steps to at least " +
                                     std::to_string(first_step));
  } else
    hook->start(flat);
  const auto save_checkpoint = [&](std::int64_t next_step) {
    const auto folder = checkpoint_folder(config.checkpoint.dir, next_step);
    state.save(folder, next_step, env.rank, env.world_size);
    if (env.rank != 0) return;
    write_file_whole(std::filesystem::path(folder) / "config.json", config.to_json().dump(2) + "\n");
    if (events) events->message({{"kind", "checkpoint"}, {"step", next_step}, {"folder", folder}});
  };

  if (events) {
    events->message({{"kind", "run_start"},
                     {"rank", env.rank},
                     {"world_size", env.world_size},
                     {"local_rank", env.local_rank},
                     {"device", device.str()},
                     {"backend", comm.backend() == CommBackend::Gloo ? "gloo" : "nccl"},
                     {"threads", threads},
                     {"torch_version", TORCH_VERSION},
                     {"parameter_count", flat.total_numel()},
                     {"parameters", parameter_list(flat)},
                     {"dataset_size", dataset->size()},
                     {"dataset", dataset->spec().describe()},
                     {"batches_per_epoch", loader.batches_per_epoch()},
                     {"first_step", first_step},
                     {"config", config.to_json()},
                     {"hook_blocking", hook->may_block()},
                     {"link_probe", link_probe}});
    events->message({{"kind", "buckets"}, {"step", first_step}, {"buckets", reducer.layout_json()}});
  }

  const bool print_progress = !events && env.rank == 0;
  const std::int64_t print_every = std::max<std::int64_t>(1, config.run.steps / 20);
  double last_loss = NAN;
  bool diverged = false;
  std::vector<std::pair<std::string, double>> step_stats;
  std::vector<std::tuple<std::size_t, std::string, double>> bucket_stats;

  // Report a failure while the reducer still stands: unwinding it may wait
  // on a collective that a failed peer never joins.
  try {
    for (std::int64_t step = first_step; step < config.run.steps; ++step) {
      if (env.rank == config.debug.fail_rank && step == config.debug.fail_at_step)
        throw std::runtime_error("injected failure at step " + std::to_string(step) + " (debug.fail_rank)");
      const auto t0 = steady::now();
      const auto traffic_before = comm.traffic();
      auto batch = loader.next();
      auto input = batch.input.to(device, /*non_blocking=*/true);
      auto target = batch.target.to(device, /*non_blocking=*/true);
      buffers.run(comm);
      const bool rebuilt = reducer.begin_step();
      hook->begin_step(step, optimizer_common.lr_at(step));
      const auto t1 = steady::now();

      const auto logits = step == first_step ? first_forward(*model, input, dataset->spec()) : model->forward(input);
      if (step == first_step) check_logits(logits, target);
      auto loss = cross_entropy(logits, target);
      const auto t2 = steady::now();

      loss.backward();
      const auto t3 = steady::now();

      // Each bucket's parameters are updated as soon as its gradients are
      // reduced, while later buckets still communicate.
      const double lr = optimizer_common.lr_at(step);
      optimizer->begin_step(lr);
      const auto report = reducer.finish_backward(
          [&](std::int64_t offset, std::int64_t numel) { optimizer->update(offset, numel); });
      const auto t4 = steady::now();

      hook->after_optimizer_step(step, lr, flat);
      last_loss = loss.item<double>();  // also waits for the device
      const auto t5 = steady::now();

      if (step < config.debug.dump_grads_steps) dump_step(config.debug, env.rank, step, reducer, flat, *hook);
      step_stats.clear();
      bucket_stats.clear();
      stats.take(step_stats, bucket_stats);
      const auto nonfinite = diverged ? std::nullopt : nonfinite_in_step(last_loss, step_stats);

      if (events) {
        if (rebuilt) events->message({{"kind", "buckets"}, {"step", step}, {"buckets", reducer.layout_json()}});
        events::StepRecord record;
        record.step = step;
        record.loss = last_loss;
        record.lr = lr;
        // The optimizer's updates inside finish_backward count as optimizer time, not as waiting.
        record.times = {seconds_between(t0, t1),
                        seconds_between(t1, t2),
                        seconds_between(t2, t3),
                        std::max(0.0, seconds_between(t3, t4) - report.reduced_work_s),
                        report.hook_compute_s,
                        report.reduced_work_s + seconds_between(t4, t5),
                        seconds_between(t0, t5)};
        record.wire_bytes = comm.traffic().wire_bytes - traffic_before.wire_bytes;
        record.uncompressed_bytes = report.uncompressed_wire_bytes;
        for (auto& [name, value] : step_stats) record.stats.push_back({std::move(name), value});
        for (auto& [bucket, name, value] : bucket_stats)
          record.bucket_stats.push_back({static_cast<std::uint32_t>(bucket), std::move(name), value});
        add_communication_stats(record, comm.take_collectives(), report, t2);
        events->step(record);
      }
      if (nonfinite) {
        // Reported after the step, so that the store holds the value that diverged.
        diverged = true;
        const auto& [what, value] = *nonfinite;
        const auto text = "rank " + std::to_string(env.rank) + "'s " + what + " is " + nonfinite_name(value) +
                          " at step " + std::to_string(step);
        if (events)
          events->message({{"kind", "nonfinite"},
                           {"rank", env.rank},
                           {"step", step},
                           {"what", what},
                           {"value", nonfinite_name(value)}});
        else
          std::fprintf(stderr, "diverged: %s\n", text.c_str());
        if (config.run.on_nonfinite == "stop") throw DivergedError("diverged: " + text);
      }
      if (!config.checkpoint.dir.empty() && config.checkpoint.every > 0 && (step + 1) % config.checkpoint.every == 0 &&
          step + 1 < config.run.steps)
        save_checkpoint(step + 1);
      if (print_progress && ((step + 1) % print_every == 0 || step + 1 == config.run.steps)) {
        std::printf("step %lld/%lld  loss %.6f  %.2f ms/step\n", static_cast<long long>(step + 1),
                    static_cast<long long>(config.run.steps), last_loss, 1e3 * seconds_between(t0, t5));
        std::fflush(stdout);
      }
    }

  } catch (const std::exception& e) {
    if (events) events->report_error(env.rank, failure_kind(e), failure_message(e));
    throw;
  }

  if (!config.checkpoint.dir.empty()) save_checkpoint(config.run.steps);
  const auto digest = tensor_digest(flat.unflatten(flat.values()));
  if (const auto& path = config.weights.save_final; !path.empty()) {
    // "{rank}" in the path: every rank writes its own (ranks that do not average exactly differ).
    const auto at = path.find("{rank}");
    if (at != std::string::npos)
      save_weights(std::string(path).replace(at, 6, std::to_string(env.rank)), flat.unflatten(flat.values()));
    else if (env.rank == 0)
      save_weights(path, flat.unflatten(flat.values()));
  }
  comm.barrier();  // rank 0 may host the store: nobody leaves before everyone is done
  if (events) {
    events->message({{"kind", "run_end"},
                     {"rank", env.rank},
                     {"steps", config.run.steps},
                     {"final_loss", last_loss},
                     {"param_digest", digest},
                     {"wall_s", seconds_between(run_start, steady::now())}});
    events->flush();
  } else if (env.rank == 0) {
    std::printf("%s: %lld steps, final loss %.6f, parameters %s\n", diverged ? "diverged" : "done",
                static_cast<long long>(config.run.steps), last_loss, digest.c_str());
  }
  return diverged;
}

}  // namespace

bool train_rank(const RunConfig& config, const DistEnv& env, events::EventWriter* events) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads =
      config.run.threads > 0 ? static_cast<int>(config.run.threads) : std::max(1, cores / env.local_world_size);
  set_up_math_libraries(threads, config.run.deterministic);
  const auto device = device_for_rank(config.run.device, config.run.backend, env.local_rank);

  Communicator comm(env, uses_gloo(config.run.backend, device) ? CommBackend::Gloo : CommBackend::Nccl,
                    std::chrono::milliseconds(static_cast<std::int64_t>(config.run.timeout_s * 1000)));
  const auto link_probe = probe_link(comm, device);  // the real link, before any emulation
  if (const auto cluster = config.network.emulated_cluster(env.world_size)) comm.emulate_link(*cluster);

  try {
    return train_with(config, env, device, threads, comm, link_probe, events);
  } catch (const std::exception& e) {
    // Report before the process group unwinds: its destructor may wait on
    // collectives that a failed peer never joins.
    if (events) events->report_error(env.rank, failure_kind(e), failure_message(e));
    throw;
  }
}

std::string failure_message(const std::exception& error) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&error);
  return one_line_error(c10_error ? c10_error->what_without_backtrace() : error.what());
}

std::string failure_kind(const std::exception& error) {
  if (dynamic_cast<const ConfigError*>(&error)) return "config";
  if (dynamic_cast<const CommunicationError*>(&error)) return "communication";
  if (dynamic_cast<const DivergedError*>(&error)) return "diverged";
  return "runtime";
}

std::string tensor_digest(const NamedTensors& tensors) {
  std::uint64_t hash = 1469598103934665603ull;
  for (const auto& [name, t] : tensors) {
    const auto cpu = t.detach().cpu().contiguous();
    const auto* bytes = static_cast<const unsigned char*>(cpu.data_ptr());
    const auto n = static_cast<std::size_t>(cpu.numel()) * cpu.element_size();
    for (std::size_t i = 0; i < n; ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

}  // namespace commtune
