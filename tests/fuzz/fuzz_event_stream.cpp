// libFuzzer target: the event stream a worker sends its launcher, and the
// event files `summarize` reads. Anything but a well-formed stream must end
// in events::ProtocolError (the one exception the launcher expects), fed
// whole or split anywhere.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/tuner/events/event_codec.h"
#include "tests/fuzz/event_mutator.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::size_t cut = size ? data[size - 1] % (size + 1) : 0;  // where a read() may split it
  commtune::events::Decoder decoder(0);
  try {
    decoder.feed(bytes.substr(0, cut));
    decoder.feed(bytes.substr(cut));
  } catch (const commtune::events::ProtocolError&) {
  }
  return 0;
}

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size,
                                               unsigned int seed) {
  return event_fuzz::mutate(data, size, max_size, seed);
}
