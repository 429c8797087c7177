// Frame cost of the live dashboard: R runs streaming at once, each already
// holding N points, a frame = the new points of every run appended + every
// plot redrawn. Cases: 8 x 100k, a 30-trial sweep x 100k (raw, smoothed, and
// as 10 configurations x 3 seeds grouped into mean and band), 8 x 1M. Goal:
// under 16 ms (60 frames/s). Reference measured in the same run: the same
// plots fed the full, unreduced data (what QCustomPlot draws without our
// min/max copies).
//
//   QT_QPA_PLATFORM=offscreen build/bench/plot_bench [RUNSxPOINTS[s|g] ...]
//   (s: smoothed, g: seeds grouped, 3 per configuration; e.g. 30x100000s)
#include <QApplication>
#include <QElapsedTimer>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ui/plot/qcustomplot.h"
#include "ui/plot/run_plots.h"

using commtune::ui::LivePoint;
using commtune::ui::RunPlots;

namespace {

constexpr int kPerFrame = 16;  // ~1000 steps/s per run arriving at 60 frames/s

LivePoint point(int run, std::int64_t step) {
  LivePoint p;
  p.run_id = run + 1;
  p.step = step;
  p.wall_s = step * 1e-3;
  p.loss = 2.0 * std::exp(-step * 1e-5) + 0.05 * std::sin(step * 0.37 + run);
  p.forward_s = 1e-3, p.backward_s = 2e-3 + 1e-4 * std::sin(step * 0.1), p.comm_wait_s = 3e-3, p.hook_s = 5e-4;
  p.wire_bytes = 1e6 / (run + 1), p.uncompressed_bytes = 4e6;
  return p;
}

struct Timing {
  double median_ms, p95_ms;
};

// Times `frames` calls of frame(first_step), each frame's steps following the last's.
template <class Frame>
Timing time_frames(std::int64_t first_step, int frames, Frame frame) {
  std::vector<double> ms;
  for (int f = 0; f < frames; ++f, first_step += kPerFrame) {
    QElapsedTimer t;
    t.start();
    frame(first_step);
    ms.push_back(t.nsecsElapsed() / 1e6);
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 95 / 100)]};
}

enum class Mode { Raw, Smoothed, Grouped };

constexpr int kSeedsPerConfiguration = 3;

Timing commtune_frames(int runs, std::int64_t n, Mode mode, int frames) {
  RunPlots plots;
  plots.resize(1400, 800);
  plots.show();
  if (mode == Mode::Smoothed) plots.set_smoothing(0.6);
  for (int r = 0; r < runs; ++r)
    plots.add_run(r + 1, mode == Mode::Grouped ? QString("%1 lr=0.0%2 seed=%3")
                                                     .arg(r + 1)
                                                     .arg(r / kSeedsPerConfiguration + 1)
                                                     .arg(r % kSeedsPerConfiguration)
                                               : QString("run %1").arg(r + 1));
  if (mode == Mode::Grouped) {
    plots.set_group_seeds(true);
    if (plots.shown_groups().size() != static_cast<std::size_t>(runs / kSeedsPerConfiguration)) {
      std::fprintf(stderr, "plot_bench: %zu seed groups shown, not %d\n", plots.shown_groups().size(),
                   runs / kSeedsPerConfiguration);
      std::exit(1);
    }
  }
  for (std::int64_t s = 0; s < n; ++s)
    for (int r = 0; r < runs; ++r) plots.append(point(r, s));
  plots.refresh(true);
  return time_frames(n, frames, [&](std::int64_t first) {
    for (std::int64_t step = first; step < first + kPerFrame; ++step)
      for (int r = 0; r < runs; ++r) plots.append(point(r, step));
    plots.refresh(true);
  });
}

// The same four plots and their graphs (loss, ratio, wire per run; the
// breakdown's four for one run), fed every point.
Timing unreduced_frames(int runs, std::int64_t n, int frames) {
  std::vector<QCustomPlot*> plots;
  QWidget host;
  host.resize(1400, 800);
  for (int i = 0; i < 4; ++i) {
    auto* p = new QCustomPlot(&host);
    p->setGeometry((i % 2) * 700, (i / 2) * 400, 700, 400);
    plots.push_back(p);
  }
  host.show();
  // Plots 0..2: loss, ratio, bytes (one graph per run); 3: the breakdown's four metrics.
  auto value = [](const LivePoint& p, int plot, int graph) {
    return commtune::ui::live_metric(p, static_cast<commtune::ui::LiveMetric>(plot < 3 ? plot : 3 + graph));
  };
  for (int i = 0; i < 4; ++i)
    for (int g = 0; g < (i == 3 ? 4 : runs); ++g) {
      auto* graph = plots[i]->addGraph();
      QVector<double> x(n), y(n);
      for (std::int64_t s = 0; s < n; ++s) {
        const auto p = point(i == 3 ? 0 : g, s);
        x[s] = static_cast<double>(s);
        y[s] = value(p, i, g);
      }
      graph->setData(x, y, true);
    }
  return time_frames(n, frames, [&](std::int64_t first) {
    for (std::int64_t step = first; step < first + kPerFrame; ++step)
      for (int i = 0; i < 4; ++i)
        for (int g = 0; g < plots[i]->graphCount(); ++g)
          plots[i]->graph(g)->addData(static_cast<double>(step), value(point(i == 3 ? 0 : g, step), i, g));
    for (auto* p : plots) {
      p->rescaleAxes();
      p->replot(QCustomPlot::rpImmediateRefresh);
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  struct Case {
    int runs;
    std::int64_t points;
    Mode mode;
  };
  std::vector<Case> cases{{8, 100000, Mode::Raw},
                          {30, 100000, Mode::Raw},
                          {30, 100000, Mode::Smoothed},
                          {30, 100000, Mode::Grouped},
                          {8, 1000000, Mode::Raw}};
  if (argc > 1) {
    cases.clear();
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      const auto x = arg.find('x');
      if (x == std::string::npos) {
        std::fprintf(stderr,
                     "plot_bench: '%s': want RUNSxPOINTS, e.g. 30x100000 (s at the end: smoothed; g: seeds grouped)\n",
                     argv[i]);
        return 2;
      }
      const Mode mode = arg.back() == 's' ? Mode::Smoothed : arg.back() == 'g' ? Mode::Grouped : Mode::Raw;
      cases.push_back({std::atoi(arg.substr(0, x).c_str()), std::atoll(arg.substr(x + 1).c_str()), mode});
    }
  }
  std::printf("%d new points per run per frame; frame = append + redraw of 4 plots\n", kPerFrame);
  for (const auto& c : cases) {
    const auto ours = commtune_frames(c.runs, c.points, c.mode, 60);
    const auto full = unreduced_frames(c.runs, c.points, c.points * c.runs >= 3000000 ? 10 : 30);
    std::printf(
        "%2d runs x %7lld points%s: commtune %6.2f ms (p95 %6.2f)   unreduced QCustomPlot %8.2f ms (p95 %8.2f)   "
        "ratio %.3f   budget use %.2f of 16 ms\n",
        c.runs, static_cast<long long>(c.points),
        c.mode == Mode::Smoothed ? ", smoothed" : c.mode == Mode::Grouped ? ", grouped " : "          ", ours.median_ms,
        ours.p95_ms,
        full.median_ms, full.p95_ms, ours.median_ms / full.median_ms, ours.median_ms / 16.0);
  }
  return 0;
}
