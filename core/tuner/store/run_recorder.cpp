#include "core/tuner/store/run_recorder.h"

#include "core/tuner/io/input_file.h"

#include <cstdio>
#include <fstream>

namespace commtune {

namespace {

struct Fnv1a {
  std::uint64_t hash = 1469598103934665603ull;
  void add(const char* data, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) hash = (hash ^ static_cast<unsigned char>(data[i])) * 1099511628211ull;
  }
  std::string hex() const {
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
    return text;
  }
};

// Messages worth keeping: what a run was (rank 0 tells for all), how it
// ended or failed (every rank), and what it wrote.
bool keep_message(std::string_view kind, int rank) {
  if (kind == "run_start" || kind == "buckets" || kind == "checkpoint") return rank == 0;
  return kind == "run_end" || kind == "error" || kind == "log";
}

}  // namespace

RunRecorder::RunRecorder(db::Writer& writer, std::int64_t run_id, double wall_offset_s, WallClock clock)
    : writer_(writer),
      run_id_(run_id),
      wall_offset_s_(wall_offset_s),
      clock_(clock),
      started_(std::chrono::steady_clock::now()) {}

std::int32_t RunRecorder::name_id(const std::string& name) {
  auto it = names_.find(name);
  if (it == names_.end()) it = names_.emplace(name, writer_.name_id(name)).first;
  return it->second;
}

void RunRecorder::on_event(const events::Event& event) {
  if (const auto* step = event.step()) {
    db::StepRow row;
    row.run_id = run_id_;
    row.rank = event.rank;
    row.step = step->step;
    row.wall_s = wall_offset_s_ + (clock_ == WallClock::StepTimes
                                       ? (rank_wall_s_[event.rank] += step->times.total)
                                       : std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
    row.loss = step->loss;
    row.lr = step->lr;
    const auto& t = step->times;
    row.t_data = t.data;
    row.t_forward = t.forward;
    row.t_backward = t.backward;
    row.t_comm_wait = t.comm_wait;
    row.t_hook = t.hook;
    row.t_optimizer = t.optimizer;
    row.t_step = t.total;
    row.wire_bytes = step->wire_bytes;
    row.uncompressed_bytes = step->uncompressed_bytes;
    writer_.add(row);
    for (const auto& s : step->stats)
      writer_.add(db::Writer::Stat{run_id_, name_id(s.name), db::kWholeStep, event.rank, step->step, s.value});
    for (const auto& s : step->bucket_stats)
      writer_.add(db::Writer::Stat{run_id_, name_id(s.name), static_cast<std::int32_t>(s.bucket), event.rank,
                                   step->step, s.value});
    return;
  }
  const auto* message = event.message();
  if (!message) return;
  const auto kind = event.kind();
  if (!keep_message(kind, event.rank)) return;
  writer_.add(db::EventRow{run_id_, event.rank, db::unix_now(), std::string(kind), *message});
  if (kind == "checkpoint")
    writer_.call([run = run_id_, folder = message->value("folder", "")](db::Store& store) {
      store.add_artifact(run, "checkpoint", folder);
    });
}

std::string run_fingerprint(const RunConfig& config) {
  Fnv1a h;
  const nlohmann::json identity = {{"model", config.model}, {"data", config.data}, {"seed", config.run.seed}};
  const auto text = identity.dump();  // nlohmann sorts keys: a canonical form
  h.add(text.data(), text.size());
  if (!config.weights.init.empty()) {
    // A folder, a pipe or /dev/zero here would hash forever.
    if (const auto problem = input_file_problem(config.weights.init); !problem.empty())
      throw ConfigError("weights.init", problem);
    std::ifstream in(config.weights.init, std::ios::binary);
    char buffer[1 << 16];
    while (in.read(buffer, sizeof buffer) || in.gcount() > 0) h.add(buffer, static_cast<std::size_t>(in.gcount()));
  }
  return h.hex();
}

}  // namespace commtune
