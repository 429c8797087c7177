#include "core/tuner/verdict/slowmo_advice.h"

#include <cstdio>

namespace commtune {

namespace {

std::string ms(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", 1e3 * seconds);
  return text;
}

}  // namespace

SlowMoAdvice slowmo_advice(double parameters, double frequency, double backward_s, const net::Cluster& cluster) {
  SlowMoAdvice a;
  a.network = cluster.network_name();
  a.allreduce_s = net::collective_time(net::Collective::Allreduce, 4 * parameters, cluster);
  a.saved_s = a.allreduce_s * (1 - 1 / frequency);
  a.backward_s = backward_s;
  a.pays_off = a.saved_s > backward_s;
  char every[32];
  std::snprintf(every, sizeof every, "%g", frequency);
  a.text = "SlowMo on " + a.network + ": allreduce " + ms(a.allreduce_s) + " ms x (1 - 1/" + every + ") = " +
           ms(a.saved_s) + " ms " + (a.pays_off ? "> " : "<= ") + "backward " + ms(backward_s) +
           " ms: " + (a.pays_off ? "pays off" : "does not pay off");
  return a;
}

nlohmann::json SlowMoAdvice::to_json() const {
  return {{"network", network},       {"allreduce_s", allreduce_s}, {"saved_s", saved_s},
          {"backward_s", backward_s}, {"pays_off", pays_off},       {"text", text}};
}

}  // namespace commtune
