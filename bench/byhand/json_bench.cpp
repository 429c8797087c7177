// db/json_text.h's parse_json_text beside nlohmann::json::parse, on JSON as
// commtune writes it (nlohmann's dump of two runs' configurations, 1 KB, and of
// 1000 runs' summaries, 1 MB) and on a text its quick path leaves to nlohmann
// (a "\u00e9" escape: the depth prescan and the repeated-key callback).
// Headers from Debian packages unpacked, not installed: apt-get download libsodium-dev libzip-dev libzip4
// libarchive-dev nlohmann-json3-dev libboost1.74-dev; dpkg -x each into /tmp/byhand/root;
// I=/tmp/byhand/root/usr/include L=/tmp/byhand/root/usr/lib/x86_64-linux-gnu, from the repository's root:
//   g++ -std=c++20 -O2 -I. -I$I bench/byhand/json_bench.cpp -o /tmp/byhand/json_bench
//   /tmp/byhand/json_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "db/json_text.h"

using nlohmann::json;

static json run_config(std::mt19937_64& random, int i) {
  std::uniform_real_distribution<double> real(1e-5, 1.0);
  json c = {{"name", "trial-" + std::to_string(i)},
            {"model", {{"kind", "resnet"}, {"depth", 18}, {"width", 64}, {"max_gib", 4.0}}},
            {"data", {{"kind", "cifar10"}, {"path", "/data/cifar-10-batches-bin"}, {"batch", 128}, {"workers", 4}}},
            {"optimizer", {{"kind", "sgd"}, {"lr", real(random)}, {"momentum", 0.9}, {"weight_decay", real(random)}}},
            {"compression",
             {{"method", "powersgd"},
              {"rank", 4},
              {"start_iter", 10},
              {"error_feedback", true},
              {"warm_start", false}}},
            {"network", {{"bandwidth_gbit", 10}, {"latency_us", 25.5}, {"links", {1, 2, 4, 8}}}},
            {"seed", random() % 100000},
            {"steps", 1000},
            {"tags", {"sweep", "powersgd", "cifar"}},
            {"notes", nullptr}};
  return c;
}

template <class F>
double us_per_parse(F parse, const std::string& text, int repeats) {
  std::vector<double> us;
  std::size_t sink = 0;
  for (int r = 0; r < 15; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats; ++i) sink += parse(text).size();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / repeats);
  }
  std::sort(us.begin(), us.end());
  if (sink == 1) std::puts("");
  return us[us.size() / 2];  // median of 15
}

int main() {
  std::mt19937_64 random(3);
  const std::string small = json{{"config", run_config(random, 0)}, {"base", run_config(random, 1)}}.dump();
  json runs = json::array();
  while (runs.dump().size() < 1'000'000) {
    json summary = run_config(random, static_cast<int>(runs.size()));
    std::vector<double> losses(40);
    for (auto& l : losses) l = std::uniform_real_distribution<double>(0.01, 3.0)(random);
    summary["losses"] = losses;
    runs.push_back(summary);
  }
  const std::string big = runs.dump();
  std::string escaped = small;
  escaped.insert(escaped.rfind("trial-"), "caf\\u00e9 ");  // late in the text: the quick path gets far

  const auto ours = [](const std::string& t) { return commtune::parse_json_text(t).json; };
  const auto theirs = [](const std::string& t) { return json::parse(t); };
  // What ours does on its fallback path, without the prescan.
  const auto theirs_checked = [](const std::string& t) {
    std::vector<std::unordered_set<std::string>> keys;
    bool repeated = false;
    return json::parse(t, [&](int, json::parse_event_t event, json& parsed) {
      if (event == json::parse_event_t::object_start) keys.emplace_back();
      else if (event == json::parse_event_t::object_end) keys.pop_back();
      else if (event == json::parse_event_t::key && !keys.empty())
        repeated |= !keys.back().insert(parsed.get_ref<const std::string&>()).second;
      return true;
    });
  };
  for (const std::string* text : {&small, &big, static_cast<const std::string*>(&escaped)})
    if (ours(*text) != theirs(*text) || !commtune::parse_json_text(*text).problem.empty()) {
      std::puts("the parsers differ");
      return 1;
    }
  struct Case { const char* what; const std::string* text; int repeats; };
  for (const auto& [what, text, repeats] :
       {Case{"1 KB config", &small, 20000}, Case{"1 MB summaries", &big, 10},
        Case{"1 KB with \\u escape", &escaped, 20000}}) {
    const double a = us_per_parse(ours, *text, repeats), b = us_per_parse(theirs, *text, repeats),
                 c = us_per_parse(theirs_checked, *text, repeats);
    std::printf("%-22s %8zu B: parse_json_text %9.2f us, nlohmann::json::parse %9.2f us (%.2fx), "
                "nlohmann with the repeated-key callback %9.2f us\n",
                what, text->size(), a, b, b / a, c);
  }
}
