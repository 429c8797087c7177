// Structure-aware mutation for the event format (docs/events.md), shared by
// the two event targets: libFuzzer's byte mutations rarely keep a frame's
// length field right, so on their own they seldom get past the first frame.
// Here an input is read as frames (u32 length | u8 type | body) and mutated
// as frames: a body mutated in place with its length fixed up, a frame
// inserted from the shapes that reach the reader's limits (long statistic
// names, deep JSON, huge counts, non-finite losses, short run_end), one
// repeated, dropped or moved; or, now and then, the bytes as bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);

namespace event_fuzz {

struct Frame {
  std::uint8_t type = 0;
  std::string body;
};

template <class T>
void put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

// Whole frames, and what follows the last whole one (kept as it is).
inline std::vector<Frame> split(const std::uint8_t* data, std::size_t size, std::string& tail) {
  std::vector<Frame> frames;
  std::size_t pos = 0;
  while (size - pos >= 5) {
    std::uint32_t length;
    std::memcpy(&length, data + pos, sizeof(length));
    if (size - pos - 5 < length) break;
    frames.push_back({data[pos + 4], std::string(reinterpret_cast<const char*>(data + pos + 5), length)});
    pos += 5 + length;
  }
  tail.assign(reinterpret_cast<const char*>(data + pos), size - pos);
  return frames;
}

inline std::string join(const std::vector<Frame>& frames, const std::string& tail) {
  std::string out;
  for (const auto& f : frames) {
    put<std::uint32_t>(out, static_cast<std::uint32_t>(f.body.size()));
    put<std::uint8_t>(out, f.type);
    out += f.body;
  }
  return out + tail;
}

inline Frame hello(std::uint32_t rank, std::uint32_t world) {
  Frame f{1, {}};
  put<std::uint32_t>(f.body, 0x56455443);
  put<std::uint16_t>(f.body, 1);
  put<std::uint32_t>(f.body, rank);
  put<std::uint32_t>(f.body, world);
  put<std::uint32_t>(f.body, 1234);
  return f;
}

inline Frame stat_name(std::uint16_t id, std::size_t length, char fill) {
  Frame f{2, {}};
  put<std::uint16_t>(f.body, id);
  put<std::uint16_t>(f.body, static_cast<std::uint16_t>(length));
  f.body.append(length, fill);
  return f;
}

inline Frame step(std::int64_t index, double loss, std::uint16_t stat_id, std::uint16_t references) {
  Frame f{3, {}};
  put<std::int64_t>(f.body, index);
  put<double>(f.body, loss);
  put<double>(f.body, 0.1);
  for (int i = 0; i < 7; ++i) put<double>(f.body, 0.001);
  put<std::uint64_t>(f.body, 4096);
  put<std::uint64_t>(f.body, 8192);
  put<std::uint16_t>(f.body, references);
  for (unsigned i = 0; i < references; ++i) {
    put<std::uint16_t>(f.body, stat_id);
    put<double>(f.body, 1.5);
  }
  put<std::uint16_t>(f.body, 0);
  return f;
}

inline Frame message(const std::string& json) { return Frame{4, json}; }

inline Frame generated(std::mt19937& rng) {
  const auto pick = [&](std::uint32_t n) { return static_cast<std::uint32_t>(rng() % n); };
  switch (pick(10)) {
    case 0:
      return hello(pick(3), 1 + pick(3));
    case 1:
      return stat_name(static_cast<std::uint16_t>(pick(4)), pick(2) ? 1 + pick(200) : 60000 + pick(5000),
                       pick(8) ? 'a' : static_cast<char>(pick(256)));
    case 2: {
      const double losses[] = {0.5, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                               -1e308};
      return step(pick(2) ? pick(8) : static_cast<std::int64_t>(rng()) << 32, losses[pick(4)],
                  static_cast<std::uint16_t>(pick(4)), static_cast<std::uint16_t>(pick(2) ? pick(4) : pick(65536)));
    }
    case 3:
      return message(R"({"kind":"run_start","rank":0,"config":{"steps":)" + std::to_string(pick(8)) +
                     R"(,"hook":{"name":"allreduce"}}})");
    case 4:
      return message(R"({"kind":"run_end","rank":0,"steps":)" + std::to_string(pick(8)) +
                     R"(,"final_loss":0.5,"wall_s":1.0})");
    case 5:
      return message(R"({"kind":"nonfinite","step":1,"what":"loss","value":"nan"})");
    case 6:
      return message(R"({"kind":"error","error_kind":"communication","message":"peer closed"})");
    case 7: {
      const auto depth = pick(2) ? 10 + pick(100) : 10000 + pick(100000);
      return message(R"({"kind":"log","x":)" + std::string(depth, '[') + std::string(depth, ']') + "}");
    }
    case 8:
      return message(R"({"kind":"run_start","config":{"hook":"evil","steps":1e18}})");
    default:
      return message(R"({"kind":"buckets","buckets":[{"index":0,"parameters":["w"]}]})");
  }
}

inline std::size_t mutate(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed) {
  std::mt19937 rng(seed);
  std::string tail;
  auto frames = split(data, size, tail);
  const auto at = [&](std::size_t n) { return n ? static_cast<std::size_t>(rng() % n) : 0; };
  switch (rng() % 6) {
    case 0:
      if (!frames.empty()) {
        auto& body = frames[at(frames.size())].body;
        const auto room = body.size() + 64;
        body.resize(room);
        body.resize(LLVMFuzzerMutate(reinterpret_cast<std::uint8_t*>(body.data()), room - 64, room));
        break;
      }
      [[fallthrough]];
    case 1:
      frames.insert(frames.begin() + static_cast<std::ptrdiff_t>(at(frames.size() + 1)), generated(rng));
      break;
    case 2:
      if (!frames.empty()) {
        const auto i = at(frames.size());
        const auto room = max_size > size ? (max_size - size) / (frames[i].body.size() + 5) : 0;
        const auto copies = std::min<std::size_t>(1 + at(rng() % 4 ? 4 : 4000), room);
        frames.insert(frames.begin() + static_cast<std::ptrdiff_t>(i), copies, frames[i]);
      }
      break;
    case 3:
      if (!frames.empty()) frames.erase(frames.begin() + static_cast<std::ptrdiff_t>(at(frames.size())));
      break;
    case 4:
      if (frames.size() > 1) std::swap(frames[at(frames.size())], frames[at(frames.size())]);
      break;
    default:
      return LLVMFuzzerMutate(data, size, max_size);
  }
  std::size_t total = tail.size();
  for (const auto& f : frames) total += 5 + f.body.size();
  if (total > max_size) return LLVMFuzzerMutate(data, size, max_size);
  const auto out = join(frames, tail);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

}  // namespace event_fuzz
