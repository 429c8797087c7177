#include "core/tuner/launch/event_files.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "core/tuner/io/input_file.h"

namespace commtune {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Ranks a job read from event files may have: a world size above this in a
// hello is a damaged or foreign file (the outcome keeps a record per rank).
constexpr std::uint32_t kMaxRanks = 1 << 16;
// Read at most this much of one file per pass, so a huge file streams through a bounded buffer.
constexpr std::size_t kChunkBytes = 4 << 20;

struct RankFile {
  std::string path;
  std::ifstream in;
  std::uint64_t offset = 0;
  events::Decoder decoder;
  int rank = -1;
  Clock::time_point last_growth = Clock::now();
};

class EventFilesReader {
 public:
  EventFilesReader(const EventFilesOptions& options, std::vector<EventSubscriber*> subscribers,
                   const OnRunStart& on_start)
      : options_(options), subscribers_(std::move(subscribers)), on_start_(on_start) {}

  EventFilesRun run() {
    const auto started = Clock::now();
    while (true) {
      discover();
      bool grew = false;
      for (auto& file : files_) grew = read_more(*file) || grew;
      if (cancelled()) return finish(RunStatus::Cancelled, "stopped reading the event files; the job may go on");
      if (!options_.follow) {
        if (!grew) break;
        continue;
      }
      if (all_ended()) break;
      if (options_.abort_reason) {
        abort_ = options_.abort_reason();
        if (!abort_.empty()) {
          discover();
          for (auto& file : files_) while (read_more(*file)) {}
          break;
        }
      }
      // Each rank by its own clock: one rank's silence counts while another still writes.
      if (const auto idle = quiet_ranks(started); !idle.empty()) {
        give_up(idle);
        break;
      }
      if (!grew) std::this_thread::sleep_for(options_.poll);
    }
    return finish(std::nullopt, "");
  }

 private:
  bool cancelled() const { return options_.cancel && options_.cancel->load(); }

  // Files named, and the *.ctev files of folders named, not seen before.
  void discover() {
    for (const auto& path : options_.paths) {
      std::error_code error;
      if (fs::is_directory(path, error)) {
        std::vector<std::string> found;
        for (const auto& entry : fs::directory_iterator(path, error))
          if (entry.path().extension() == ".ctev" && entry.is_regular_file(error)) found.push_back(entry.path());
        std::sort(found.begin(), found.end());
        for (const auto& f : found) add(f);
      } else if (!options_.follow || fs::exists(path, error)) {
        add(path);
      }
    }
  }

  void add(const std::string& path) {
    if (!seen_paths_.insert(path).second) return;
    if (const auto problem = input_file_problem(path); !problem.empty()) throw std::runtime_error(problem);
    auto file = std::make_unique<RankFile>();
    file->path = path;
    file->in.open(path, std::ios::binary);
    if (!file->in) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
    files_.push_back(std::move(file));
  }

  // Feeds what was appended to `file` since the last pass; returns whether anything was.
  bool read_more(RankFile& file) {
    chunk_.resize(kChunkBytes);  // allocated once, reused by every file and pass
    file.in.clear();
    file.in.seekg(static_cast<std::streamoff>(file.offset));
    file.in.read(chunk_.data(), static_cast<std::streamsize>(chunk_.size()));
    const auto got = static_cast<std::size_t>(std::max<std::streamsize>(0, file.in.gcount()));
    if (got == 0) return false;
    file.offset += got;
    file.last_growth = Clock::now();
    std::vector<events::Event> decoded;
    try {
      decoded = file.decoder.feed(std::string_view(chunk_.data(), got));
    } catch (const events::ProtocolError& e) {
      throw std::runtime_error(file.path + " is not a commtune event file: " + e.what());
    }
    try {
      for (auto& event : decoded) {
        if (cancelled()) break;  // a chunk holds some 40000 steps: the rest is not read, as the files after it
        dispatch(file, std::move(event));
      }
    } catch (const nlohmann::json::exception& e) {  // a message whose fields have the wrong types
      throw std::runtime_error(file.path + " holds a malformed message: " + e.what());
    }
    return true;
  }

  void dispatch(RankFile& file, events::Event event) {
    if (const auto* hello = std::get_if<events::Hello>(&event.payload)) {
      if (hello->world_size > kMaxRanks)
        throw std::runtime_error(file.path + " says its job has " + std::to_string(hello->world_size) +
                                 " ranks, more than " + std::to_string(kMaxRanks) + ": a damaged or foreign file");
      if (hello->world_size == 0 || hello->rank >= hello->world_size)
        throw std::runtime_error(file.path + " says rank " + std::to_string(hello->rank) + " of " +
                                 std::to_string(hello->world_size) + ": not a rank of a job");
      if (world_size_ != 0 && static_cast<int>(hello->world_size) != world_size_)
        throw std::runtime_error(file.path + " is from a job of " + std::to_string(hello->world_size) +
                                 " ranks, the other files from one of " + std::to_string(world_size_));
      world_size_ = static_cast<int>(hello->world_size);
      file.rank = static_cast<int>(hello->rank);
      if (!ranks_seen_.insert(file.rank).second)
        throw std::runtime_error(file.path + " is rank " + std::to_string(file.rank) +
                                 "'s event file, and so is another one named");
      outcome_.ranks.resize(static_cast<std::size_t>(world_size_));
      for (int r = 0; r < world_size_; ++r) outcome_.ranks[static_cast<std::size_t>(r)].rank = r;
      outcome_.ranks[static_cast<std::size_t>(file.rank)].pid = static_cast<int>(hello->pid);
    }
    auto& rank = outcome_.ranks.at(static_cast<std::size_t>(event.rank));
    note_rank_event(rank, event);
    if (const auto* step = event.step()) {
      last_step_.resize(outcome_.ranks.size(), -1);
      auto& last = last_step_[static_cast<std::size_t>(event.rank)];
      last = std::max(last, step->step);
    }
    const auto kind = event.kind();
    if (kind == "run_end") {
      rank.exit_code = 0;
      outcome_.wall_s = std::max(outcome_.wall_s, event.message()->value("wall_s", 0.0));
    }
    if (kind == "run_start" && event.rank == 0 && !started_) start(event.message()->value("config", config_));
    for (auto* s : subscribers_) s->on_event(event);
    if (!started_) early_.push_back(std::move(event));
  }

  void start(const nlohmann::json& config) {
    started_ = true;
    config_ = config.is_object() ? config : nlohmann::json::object();
    if (!on_start_) return;
    for (auto* s : on_start_(config_, world_size_)) {
      for (const auto& e : early_) s->on_event(e);
      subscribers_.push_back(s);
    }
    early_.clear();
  }

  bool ended(const RankOutcome& r) const { return r.reported_end || !r.error.empty(); }

  bool all_ended() const {
    if (world_size_ == 0 || static_cast<int>(ranks_seen_.size()) < world_size_) return false;
    return std::all_of(outcome_.ranks.begin(), outcome_.ranks.end(), [&](const auto& r) { return ended(r); });
  }

  // Ranks that have not ended and whose events stopped (or never came) longer than the limit ago.
  std::vector<int> quiet_ranks(Clock::time_point started) const {
    const auto now = Clock::now();
    std::vector<int> out;
    if (world_size_ == 0) {
      if (now - started > options_.quiet_limit) out.push_back(0);
      return out;
    }
    // When each rank's file last grew (a rank without a file yet: since reading began).
    std::vector<Clock::time_point> last(static_cast<std::size_t>(world_size_), started);
    for (const auto& f : files_)
      if (f->rank >= 0) last[static_cast<std::size_t>(f->rank)] = f->last_growth;
    for (std::size_t r = 0; r < last.size(); ++r)
      if (!ended(outcome_.ranks[r]) && now - last[r] > options_.quiet_limit) out.push_back(static_cast<int>(r));
    return out;
  }

  void give_up(const std::vector<int>& ranks) {
    for (const int r : ranks)
      if (world_size_ > 0) silent_.insert(r);
    if (world_size_ == 0) no_files_reason_ = "no event file appeared in " + seconds_quiet() + " s";
  }

  std::string seconds_quiet() const { return std::to_string(options_.quiet_limit.count() / 1000); }

  std::int64_t last_step(int rank) const {
    return static_cast<std::size_t>(rank) < last_step_.size() ? last_step_[static_cast<std::size_t>(rank)] : -1;
  }

  // Why rank `r`, which did not report an end, failed the run.
  std::string failure_of(const RankOutcome& r) const {
    if (!r.error.empty()) return r.error;
    if (!ranks_seen_.count(r.rank))
      return options_.follow ? "no event file appeared for it in " + seconds_quiet() + " s"
                             : "no event file was given for it";
    const auto where = last_step(r.rank) < 0 ? std::string("before its first step")
                                             : "after step " + std::to_string(last_step(r.rank));
    if (silent_.count(r.rank))
      return "its events stopped " + where + " and nothing came for " + seconds_quiet() + " s, without an end" +
             (options_.local ? "" : " (its node may be gone)");
    return "its events end " + where + ", before the run does";
  }

  // The rank to blame among those that did not end: one that reported its
  // own error first, then the one whose events stopped earliest (its peers
  // usually stop later, waiting for it), a communication error last.
  const RankOutcome* culprit() const {
    const auto order = [&](const RankOutcome& r) {
      const int kind = !r.error.empty() && r.error_kind != "communication" ? 0 : r.error.empty() ? 1 : 2;
      return std::make_tuple(kind, ranks_seen_.count(r.rank) ? last_step(r.rank) : -2, r.rank);
    };
    const RankOutcome* blamed = nullptr;
    for (const auto& r : outcome_.ranks)
      if (!r.reported_end && (!blamed || order(r) < order(*blamed))) blamed = &r;
    return blamed;
  }

  // Ranks that reported an end but whose steps stop short of the run's:
  // the first such, with its last step.
  std::optional<std::pair<int, std::int64_t>> ended_short() const {
    const auto steps = config_.is_object() ? config_.value("steps", nlohmann::json()) : nlohmann::json();
    if (!steps.is_number_integer()) return std::nullopt;
    for (const auto& r : outcome_.ranks)
      if (r.reported_end && last_step(r.rank) + 1 < steps.get<std::int64_t>())
        return std::make_pair(r.rank, last_step(r.rank));
    return std::nullopt;
  }

  EventFilesRun finish(std::optional<RunStatus> forced, const std::string& reason) {
    if (!started_) start(config_);
    EventFilesRun out;
    out.world_size = world_size_;
    out.config = config_;
    outcome_.status = RunStatus::Succeeded;
    if (forced) {
      outcome_.status = *forced;
      outcome_.reason = reason;
    } else if (world_size_ == 0) {
      outcome_.status = RunStatus::Failed;
      outcome_.reason = !abort_.empty()            ? abort_ + " (no rank wrote an event)"
                        : no_files_reason_.empty() ? "the event files hold no events"
                                                   : no_files_reason_;
    } else {
      if (const auto* r = culprit()) {
        outcome_.status = RunStatus::Failed;
        outcome_.failed_rank = r->rank;
        // A rank that said what went wrong is the cause, whatever ended the
        // reading after it (its launcher's exit, most often).
        const bool own_error = !r->error.empty() && r->error_kind != "communication";
        outcome_.reason = abort_.empty() || own_error
                              ? "rank " + std::to_string(r->rank) + " failed: " + failure_of(*r)
                              : abort_ + " (rank " + std::to_string(r->rank) + ": " + failure_of(*r) + ")";
      } else if (const auto short_end = ended_short()) {
        outcome_.status = RunStatus::Failed;
        outcome_.failed_rank = short_end->first;
        outcome_.reason = "rank " + std::to_string(short_end->first) + " reported an end after step " +
                          std::to_string(short_end->second) + " of a run of " +
                          config_.value("steps", nlohmann::json()).dump() + " steps";
      }
      mark_divergence(outcome_);
    }
    out.outcome = outcome_;
    return out;
  }

  const EventFilesOptions& options_;
  std::vector<EventSubscriber*> subscribers_;
  const OnRunStart& on_start_;
  std::vector<std::unique_ptr<RankFile>> files_;
  std::set<std::string> seen_paths_;
  std::set<int> ranks_seen_;
  int world_size_ = 0;
  RunOutcome outcome_;
  nlohmann::json config_ = nlohmann::json::object();
  bool started_ = false;
  std::vector<events::Event> early_;  // before the run's start, for subscribers added then
  std::string chunk_;
  std::string no_files_reason_;
  std::vector<std::int64_t> last_step_;  // per rank, -1 before its first step
  std::set<int> silent_;                 // ranks given up for silence
  std::string abort_;                    // options_.abort_reason's answer, when it ended the reading
};

}  // namespace

EventFilesRun read_event_files(const EventFilesOptions& options, std::vector<EventSubscriber*> subscribers,
                               const OnRunStart& on_start) {
  EventFilesReader reader(options, std::move(subscribers), on_start);
  return reader.run();
}

}  // namespace commtune
