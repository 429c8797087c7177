#include "ui/screenshot_tour.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QPixmap>
#include <QTabWidget>
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

// Shows the Analysis view with this tab title.
void show_view(MainWindow& window, const QString& title) {
  auto* views = window.analysis()->views();
  for (int i = 0; i < views->count(); ++i)
    if (views->tabText(i) == title) views->setCurrentIndex(i);
}

}  // namespace

// After a page's data has arrived: long enough for its plots and tables to be laid out and drawn.
constexpr int kSettleMs = 400;

void take_screenshots(MainWindow& window, const QString& spec_path, const QString& out_dir,
                      std::function<void(int)> done) {
  QDir().mkpath(out_dir);
  auto save = [&window, out_dir](const QString& name) {
    const auto path = QDir(out_dir).filePath(name + ".png");
    window.grab().save(path);
    std::fprintf(stderr, "commtune: wrote %s\n", qPrintable(path));
  };
  auto fail = [done](const char* what) {
    return [done, what] {
      std::fprintf(stderr, "commtune: screenshots: %s\n", what);
      done(1);
    };
  };
  QFile f(spec_path);
  if (!f.open(QIODevice::ReadOnly)) return fail("cannot read the sweep spec")();
  window.set_theme(ThemeChoice::Light);
  window.launch()->load_json(nlohmann::json::parse(f.readAll().toStdString()));
  // Every page once the whole sweep is stored, in one theme: `suffix` names the files.
  auto tour = std::make_shared<std::function<void(const QString&, std::function<void()>)>>();
  *tour = [=, &window](const QString& suffix, std::function<void()> next) {
    // Each page is taken once its data has arrived (`ready`) and a moment after, for the plots to draw.
    struct Step {
      std::function<void()> show;
      QString name;
      std::function<bool()> ready;
    };
    const auto always = [] { return true; };
    auto steps = std::make_shared<std::vector<Step>>(std::vector<Step>{
        {[&window] { window.show_page(MainWindow::kLaunch); }, "launch", always},
        {[&window] { window.show_page(MainWindow::kDashboard); }, "dashboard", always},
        {[&window] {
           std::vector<std::int64_t> ids;  // the sweep's trials and baselines (ids the store lacks are skipped)
           for (std::int64_t id = 1; id <= 40; ++id) ids.push_back(id);
           window.runs()->open_runs(ids);
           window.show_page(MainWindow::kRuns);
         },
         "runs", [&window] { return !window.runs()->loading(); }},
        {[&window] {
           window.analysis()->select_sweep(1);
           window.analysis()->views()->setCurrentIndex(0);
           window.show_page(MainWindow::kAnalysis);
         },
         "analysis", [&window] { return !window.analysis()->analysing(); }},
        {[&window] { show_view(window, "Slices"); }, "slices", always},
        {[&window] { show_view(window, "Parallel coordinates"); }, "parallel", always},
        {[&window] { show_view(window, "Parameter importance"); }, "importance", always},
        {[&window] { show_view(window, "History and distribution"); }, "history", always},
        {[&window] { show_view(window, "Scatter matrix"); }, "scatter", always},
    });
    auto index = std::make_shared<std::size_t>(0);
    auto advance = std::make_shared<std::function<void()>>();
    *advance = [=, &window] {
      if (*index == steps->size()) return next();
      const auto& step = (*steps)[(*index)++];
      step.show();
      when(
          step.ready,
          [=, &window] {
            QTimer::singleShot(kSettleMs, &window, [=] {
              save(step.name + suffix);
              (*advance)();
            });
          },
          fail("a page did not load its data"), 60);
    };
    (*advance)();
  };
  QTimer::singleShot(1000, &window, [=, &window] {
    window.start_sweep();
    if (!window.engine().busy()) return fail("the sweep did not start")();
    when([&window] { return !window.engine().busy(); },
         [=, &window] {
           window.runs()->refresh();
           when([&window] { return !window.runs()->loading(); },
                [=, &window] {
                  // A 1080p screen (the README's pictures), then a laptop's 1366x768 ("-1366"), each in both themes.
                  auto at_size = [=, &window](QSize size, const QString& suffix, std::function<void()> next) {
                    window.resize(size);
                    window.set_theme(ThemeChoice::Light);
                    (*tour)(suffix, [=, &window] {
                      window.set_theme(ThemeChoice::Dark);
                      (*tour)(suffix + "-dark", next);
                    });
                  };
                  at_size(QSize(1920, 1080), "", [=, &window] {
                    at_size(QSize(1366, 768), "-1366", [=, &window] {
                      window.set_theme(ThemeChoice::System);
                      done(0);
                    });
                  });
                },
                fail("the run browser did not load"), 30);
         },
         fail("the sweep did not finish"), 1800);
  });
}

}  // namespace commtune::ui
