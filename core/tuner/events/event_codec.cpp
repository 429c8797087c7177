#include "core/tuner/events/event_codec.h"

#include <algorithm>
#include <cstring>

#include "db/json_text.h"

namespace commtune::events {

namespace {

template <class T>
void put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // the supported hosts are little-endian (x86-64, aarch64)
  out.append(bytes, sizeof(T));
}

class Reader {
 public:
  explicit Reader(std::string_view body) : body_(body) {}
  template <class T>
  T get() {
    if (body_.size() - pos_ < sizeof(T)) throw ProtocolError("event frame is shorter than its contents");
    T value;
    std::memcpy(&value, body_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::string_view bytes(size_t n) {
    if (body_.size() - pos_ < n) throw ProtocolError("event frame is shorter than its contents");
    auto s = body_.substr(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  std::string_view body_;
  size_t pos_ = 0;
};

// Reserves the frame header, returns its position; `finish_frame` fills in the length.
size_t begin_frame(std::string& out, FrameType type) {
  const size_t at = out.size();
  put<std::uint32_t>(out, 0);
  put<std::uint8_t>(out, static_cast<std::uint8_t>(type));
  return at;
}

void finish_frame(std::string& out, size_t at) {
  const auto length = static_cast<std::uint32_t>(out.size() - at - 5);
  std::memcpy(out.data() + at, &length, sizeof(length));
}

constexpr size_t kMaxFrame = 64u << 20;

// Every step record carries its statistics' names (copied per record): a
// bound on a name's length bounds what a small file can make the reader
// allocate. The engine's names are short identifiers ("compression_ratio").
constexpr size_t kMaxStatNameBytes = 128;
// A message is one JSON object of a few kilobytes (run_start with its configuration, buckets).
constexpr size_t kMaxMessageBytes = 4u << 20;

// Printable ASCII, 1 to kMaxStatNameBytes long: what a statistic's name may be.
bool valid_stat_name(std::string_view name) {
  return !name.empty() && name.size() <= kMaxStatNameBytes &&
         std::all_of(name.begin(), name.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

}  // namespace

std::string_view Event::kind() const {
  const auto* m = message();
  if (!m) return {};
  auto it = m->find("kind");
  return it != m->end() && it->is_string() ? std::string_view(it->get_ref<const std::string&>()) : std::string_view();
}

void Encoder::hello(std::string& out, const Hello& hello) const {
  const auto at = begin_frame(out, FrameType::Hello);
  put<std::uint32_t>(out, kMagic);
  put<std::uint16_t>(out, hello.version);
  put<std::uint32_t>(out, hello.rank);
  put<std::uint32_t>(out, hello.world_size);
  put<std::uint32_t>(out, hello.pid);
  finish_frame(out, at);
}

std::uint16_t Encoder::intern(std::string& out, const std::string& name) {
  if (auto it = ids_.find(name); it != ids_.end()) return it->second;
  if (ids_.size() >= 0xFFFF) throw std::length_error("too many distinct statistic names in one event stream");
  const auto id = static_cast<std::uint16_t>(ids_.size());
  ids_.emplace(name, id);
  if (!valid_stat_name(name))
    throw std::invalid_argument("statistic name '" + name.substr(0, kMaxStatNameBytes) +
                                "' is not 1 to 128 printable ASCII characters");
  const auto at = begin_frame(out, FrameType::StatName);
  put<std::uint16_t>(out, id);
  const auto length = static_cast<std::uint16_t>(name.size());
  put<std::uint16_t>(out, length);
  out.append(name.data(), length);
  finish_frame(out, at);
  return id;
}

void Encoder::step(std::string& out, const StepRecord& r) {
  // Intern first: StatName frames must precede the Step frame that uses them.
  std::vector<std::uint16_t> stat_ids, bucket_ids;
  stat_ids.reserve(r.stats.size());
  bucket_ids.reserve(r.bucket_stats.size());
  for (const auto& s : r.stats) stat_ids.push_back(intern(out, s.name));
  for (const auto& s : r.bucket_stats) bucket_ids.push_back(intern(out, s.name));

  const auto at = begin_frame(out, FrameType::Step);
  put<std::int64_t>(out, r.step);
  put<double>(out, r.loss);
  put<double>(out, r.lr);
  for (double t : {r.times.data, r.times.forward, r.times.backward, r.times.comm_wait, r.times.hook, r.times.optimizer,
                   r.times.total})
    put<double>(out, t);
  put<std::uint64_t>(out, r.wire_bytes);
  put<std::uint64_t>(out, r.uncompressed_bytes);
  put<std::uint16_t>(out, static_cast<std::uint16_t>(r.stats.size()));
  for (size_t i = 0; i < r.stats.size(); ++i) {
    put<std::uint16_t>(out, stat_ids[i]);
    put<double>(out, r.stats[i].value);
  }
  put<std::uint16_t>(out, static_cast<std::uint16_t>(r.bucket_stats.size()));
  for (size_t i = 0; i < r.bucket_stats.size(); ++i) {
    put<std::uint32_t>(out, r.bucket_stats[i].bucket);
    put<std::uint16_t>(out, bucket_ids[i]);
    put<double>(out, r.bucket_stats[i].value);
  }
  finish_frame(out, at);
}

void Encoder::message(std::string& out, const nlohmann::json& message) const {
  const auto at = begin_frame(out, FrameType::Message);
  out += message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  finish_frame(out, at);
}

std::vector<Event> Decoder::feed(std::string_view bytes) {
  std::vector<Event> events;
  pending_.append(bytes.data(), bytes.size());
  size_t pos = 0;
  while (pending_.size() - pos >= 5) {
    std::uint32_t length;
    std::memcpy(&length, pending_.data() + pos, sizeof(length));
    if (length > kMaxFrame) throw ProtocolError("event frame of " + std::to_string(length) + " bytes is not plausible");
    if (pending_.size() - pos - 5 < length) break;
    const auto type = static_cast<FrameType>(static_cast<std::uint8_t>(pending_[pos + 4]));
    const std::string_view body(pending_.data() + pos + 5, length);
    if (type == FrameType::StatName) {
      Reader in(body);
      const auto id = in.get<std::uint16_t>();
      const auto n = in.get<std::uint16_t>();
      const auto name = in.bytes(n);
      if (!valid_stat_name(name))
        throw ProtocolError("statistic name of " + std::to_string(n) +
                            " bytes is not 1 to 128 printable ASCII characters");
      names_[id] = std::string(name);
    } else {
      events.push_back(decode(type, body));
    }
    pos += 5 + length;
  }
  pending_.erase(0, pos);
  return events;
}

Event Decoder::decode(FrameType type, std::string_view body) {
  Reader in(body);
  if (!saw_hello_ && type != FrameType::Hello) throw ProtocolError("event stream does not start with a hello frame");
  switch (type) {
    case FrameType::Hello: {
      if (in.get<std::uint32_t>() != kMagic) throw ProtocolError("not a commtune event stream (bad magic)");
      Hello h;
      h.version = in.get<std::uint16_t>();
      if (h.version != kProtocolVersion)
        throw ProtocolError("event stream version " + std::to_string(h.version) +
                            " is not supported (this build reads " + std::to_string(kProtocolVersion) +
                            "): worker and launcher come from different builds");
      h.rank = in.get<std::uint32_t>();
      h.world_size = in.get<std::uint32_t>();
      h.pid = in.get<std::uint32_t>();
      saw_hello_ = true;
      if (rank_ < 0) rank_ = static_cast<int>(h.rank);
      return Event{rank_, h};
    }
    case FrameType::Step: {
      StepRecord r;
      r.step = in.get<std::int64_t>();
      r.loss = in.get<double>();
      r.lr = in.get<double>();
      for (double* t : {&r.times.data, &r.times.forward, &r.times.backward, &r.times.comm_wait, &r.times.hook,
                        &r.times.optimizer, &r.times.total})
        *t = in.get<double>();
      r.wire_bytes = in.get<std::uint64_t>();
      r.uncompressed_bytes = in.get<std::uint64_t>();
      auto name_of = [&](std::uint16_t id) -> const std::string& {
        auto it = names_.find(id);
        if (it == names_.end()) throw ProtocolError("statistic id " + std::to_string(id) + " used before its name");
        return it->second;
      };
      const auto n = in.get<std::uint16_t>();
      r.stats.reserve(n);
      for (unsigned i = 0; i < n; ++i) {
        const auto& name = name_of(in.get<std::uint16_t>());
        r.stats.push_back({name, in.get<double>()});
      }
      const auto m = in.get<std::uint16_t>();
      r.bucket_stats.reserve(m);
      for (unsigned i = 0; i < m; ++i) {
        const auto bucket = in.get<std::uint32_t>();
        const auto& name = name_of(in.get<std::uint16_t>());
        r.bucket_stats.push_back({bucket, name, in.get<double>()});
      }
      return Event{rank_, std::move(r)};
    }
    case FrameType::Message: {
      if (body.size() > kMaxMessageBytes)
        throw ProtocolError("event message of " + std::to_string(body.size()) + " bytes is not plausible");
      if (json_nesting_depth(body) > kMaxJsonDepth)
        throw ProtocolError("event message nests more than " + std::to_string(kMaxJsonDepth) + " levels deep");
      auto parsed = parse_json_text(body);
      if (!parsed.problem.empty()) throw ProtocolError("event message is not JSON: " + parsed.problem);
      if (!parsed.json.is_object()) throw ProtocolError("event message is not a JSON object");
      return Event{rank_, std::move(parsed.json)};
    }
    case FrameType::StatName:
      break;
  }
  throw ProtocolError("unknown event frame type " + std::to_string(static_cast<int>(type)));
}

}  // namespace commtune::events
