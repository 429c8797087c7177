#include "ui/screenshot_tour.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QPixmap>
#include <QTimer>
#include <cstdio>
#include <memory>

#include "ui/engine_session.h"
#include "ui/main_window.h"
#include "ui/pages/analysis_page.h"
#include "ui/pages/dashboard_page.h"
#include "ui/pages/launch_page.h"
#include "ui/pages/runs_page.h"

namespace commtune::ui {

namespace {

// Polls `ready` every 100 ms; then `next`, or `fail` after `timeout_s`.
void when(std::function<bool()> ready, std::function<void()> next, std::function<void()> fail, double timeout_s) {
  auto clock = std::make_shared<QElapsedTimer>();
  clock->start();
  auto poll = std::make_shared<std::function<void()>>();
  *poll = [=] {
    if (ready()) return next();
    if (clock->elapsed() > timeout_s * 1e3) return fail();
    QTimer::singleShot(100, *poll);
  };
  QTimer::singleShot(0, *poll);
}

}  // namespace

void take_screenshots(MainWindow& window, const QString& spec_path, const QString& out_dir,
                      std::function<void(int)> done) {
  QDir().mkpath(out_dir);
  auto shot = [&window, out_dir](MainWindow::Page page, const QString& name) {
    window.show_page(page);
    QTimer::singleShot(400, &window, [&window, out_dir, name] {
      const auto path = QDir(out_dir).filePath(name + ".png");
      window.grab().save(path);
      std::fprintf(stderr, "commtune: wrote %s\n", qPrintable(path));
    });
  };
  auto fail = [done](const char* what) {
    return [done, what] {
      std::fprintf(stderr, "commtune: screenshots: %s\n", what);
      done(1);
    };
  };
  QFile f(spec_path);
  if (!f.open(QIODevice::ReadOnly)) return fail("cannot read the sweep spec")();
  window.launch()->load_json(nlohmann::json::parse(f.readAll().toStdString()));
  shot(MainWindow::kLaunch, "launch");
  QTimer::singleShot(1000, &window, [=, &window] {
    window.start_sweep();
    if (!window.engine().busy()) return fail("the sweep did not start")();
    // The dashboard mid-sweep: a few trials done, one running.
    when([&window] { return window.dashboard()->row_of(3) >= 0 || window.dashboard()->row_of(4) >= 0; },
         [=, &window] {
           QTimer::singleShot(2500, &window, [=, &window] {
             shot(MainWindow::kDashboard, "dashboard");
             when([&window] { return !window.engine().busy(); },
                  [=, &window] {
                    window.runs()->refresh();
                    when([&window] { return !window.runs()->loading(); },
                         [=, &window] {
                           window.runs()->open_runs({1, 2, 3});
                           QTimer::singleShot(1500, &window, [=, &window] {
                             shot(MainWindow::kRuns, "runs");
                             QTimer::singleShot(1000, &window, [=, &window] {
                               window.analysis()->select_sweep(1);
                               window.show_page(MainWindow::kAnalysis);
                               QTimer::singleShot(4000, &window, [=, &window] {
                                 shot(MainWindow::kAnalysis, "analysis");
                                 QTimer::singleShot(1000, &window, [done] { done(0); });
                               });
                             });
                           });
                         },
                         fail("the run browser did not load"), 30);
                  },
                  fail("the sweep did not finish"), 600);
           });
         },
         fail("no trial started"), 300);
  });
}

}  // namespace commtune::ui
