// The event stream from a worker to its launcher: framed, versioned, and cheap
// enough to emit every step. docs/events.md describes the wire format.
//
//   frame  := u32 body_length | u8 type | body          (little-endian)
//   Hello   : u32 magic "CTEV" | u16 version | u32 rank | u32 world_size | u32 pid
//   StatName: u16 id | u16 length | name bytes          (sent once, before first use)
//   Step    : i64 step | f64 loss | f64 lr | 7 x f64 times | u64 wire | u64 uncompressed
//             | u16 n | n x (u16 id, f64 value)
//             | u16 m | m x (u32 bucket, u16 id, f64 value)
//   Message : UTF-8 JSON object with a "kind" (run_start, buckets, log, run_end, error)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace commtune::events {

inline constexpr std::uint16_t kProtocolVersion = 1;
inline constexpr std::uint32_t kMagic = 0x56455443;  // "CTEV" little-endian

enum class FrameType : std::uint8_t { Hello = 1, StatName = 2, Step = 3, Message = 4 };

// Seconds spent in each phase of one optimizer step on one rank. `hook` is the
// CPU time spent inside the communication hook and its callbacks (it overlaps
// backward and comm_wait); the others are consecutive wall-clock phases that
// sum to `total`.
struct StepTimes {
  double data = 0, forward = 0, backward = 0, comm_wait = 0, hook = 0, optimizer = 0, total = 0;
};

struct Stat {
  std::string name;
  double value = 0;
};

struct BucketStat {
  std::uint32_t bucket = 0;
  std::string name;
  double value = 0;
};

struct StepRecord {
  std::int64_t step = 0;
  double loss = 0;
  double lr = 0;
  StepTimes times;
  std::uint64_t wire_bytes = 0;          // bytes this rank sent in this step's collectives
  std::uint64_t uncompressed_bytes = 0;  // what plain fp32 allreduce of the same buckets would send
  std::vector<Stat> stats;
  std::vector<BucketStat> bucket_stats;
};

struct Hello {
  std::uint16_t version = kProtocolVersion;
  std::uint32_t rank = 0;
  std::uint32_t world_size = 0;
  std::uint32_t pid = 0;
};

using Payload = std::variant<Hello, StepRecord, nlohmann::json>;

struct Event {
  int rank = -1;
  Payload payload;

  const StepRecord* step() const { return std::get_if<StepRecord>(&payload); }
  const nlohmann::json* message() const { return std::get_if<nlohmann::json>(&payload); }
  // The "kind" of a message event, or "" for other events.
  std::string_view kind() const;
};

// Appends frames to a byte buffer. Stat names are interned: the first use of a
// name emits a StatName frame before the Step frame that uses it.
class Encoder {
 public:
  void hello(std::string& out, const Hello& hello) const;
  void step(std::string& out, const StepRecord& record);
  void message(std::string& out, const nlohmann::json& message) const;

 private:
  std::uint16_t intern(std::string& out, const std::string& name);
  std::unordered_map<std::string, std::uint16_t> ids_;
};

class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Turns a byte stream back into events, frame by frame; bytes may arrive in
// arbitrary pieces. Throws ProtocolError on a malformed or foreign stream.
class Decoder {
 public:
  explicit Decoder(int rank = -1) : rank_(rank) {}
  // Consumes `bytes` and returns the events completed by them.
  std::vector<Event> feed(std::string_view bytes);
  // True when a frame is half received (the stream ended mid-frame).
  bool has_partial_frame() const { return !pending_.empty(); }

 private:
  Event decode(FrameType type, std::string_view body);

  int rank_;
  bool saw_hello_ = false;
  std::string pending_;
  std::unordered_map<std::uint16_t, std::string> names_;
};

}  // namespace commtune::events
