// SlowMo's rule of thumb (fairscale's docs), answered once for the CLI's
// predict and the Analysis page: SlowMo pays off when an allreduce of all
// gradients, times the share of steps its local SGD skips it, takes longer
// than backward.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/tuner/netmodel/network.h"

namespace commtune {

struct SlowMoAdvice {
  std::string network;
  double allreduce_s = 0;  // one allreduce of every gradient on the cluster
  double saved_s = 0;      // per step, with one in `frequency` steps averaging
  double backward_s = 0;   // the target's backward
  bool pays_off = false;
  std::string text;        // "SlowMo on 10gbit: allreduce 2.10 ms x (1 - 1/4) = ... : pays off"

  nlohmann::json to_json() const;
};

// For a model of `parameters` float32 parameters averaged every
// `frequency` steps, whose backward takes `backward_s` on the target.
SlowMoAdvice slowmo_advice(double parameters, double frequency, double backward_s, const net::Cluster& cluster);

}  // namespace commtune
