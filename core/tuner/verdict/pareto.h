// The trade-off the Analysis page plots and `compare` lists: tail loss
// against a cost (bytes on the wire per step, or a predicted step time), one
// point per configuration (its seeds' mean tail loss, its first run's cost).
// A point is on the front when nothing as cheap or cheaper reaches its loss.
// A point whose cost or loss is not finite (a diverged configuration) is on no
// front and left out.
#pragma once

#include <cstdint>
#include <vector>

namespace commtune {

struct TradeOff {
  std::int64_t run_id = 0;  // the configuration's first run
  double cost = 0;
  double loss = 0;
};

struct ParetoPoint {
  TradeOff point;
  bool on_front = false;
};

// The finite points, by cost, then loss (then run id), each marked.
std::vector<ParetoPoint> pareto_order(std::vector<TradeOff> points);

// The run ids on the front, cheapest first.
std::vector<std::int64_t> pareto_front(const std::vector<ParetoPoint>& ordered);

}  // namespace commtune
