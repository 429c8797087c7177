#include "core/engine/dist/dist_env.h"

#include <cstdlib>
#include <stdexcept>

namespace commtune {

namespace {

int read_int(const char* name, int fallback, int min_value, int max_value) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < min_value || value > max_value)
    throw std::invalid_argument(std::string("environment variable ") + name + "='" + text +
                                "' is not an integer from " + std::to_string(min_value) + " to " +
                                std::to_string(max_value));
  return static_cast<int>(value);
}

}  // namespace

DistEnv DistEnv::from_environment() {
  DistEnv env;
  env.world_size = read_int("WORLD_SIZE", 1, 1, 1 << 20);
  env.rank = read_int("RANK", 0, 0, env.world_size - 1);
  env.local_world_size = read_int("LOCAL_WORLD_SIZE", env.world_size, 1, env.world_size);
  env.local_rank = read_int("LOCAL_RANK", env.rank % env.local_world_size, 0, env.local_world_size - 1);
  if (const char* addr = std::getenv("MASTER_ADDR"); addr && *addr) env.master_addr = addr;
  env.master_port = read_int("MASTER_PORT", 29500, 0, 65535);
  if (const char* file = std::getenv("COMMTUNE_STORE_FILE"); file && *file) env.store_file = file;
  if (const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE"))
    env.agent_hosts_store = std::string(agent) == "True" || std::string(agent) == "1";
  return env;
}

bool DistEnv::is_loopback() const {
  return master_addr == "localhost" || master_addr.rfind("127.", 0) == 0 || master_addr == "::1";
}

}  // namespace commtune
