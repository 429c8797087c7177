// commtune: the desktop app. Without a display it says how to go on (the
// offscreen platform, or the CLI) and exits instead of aborting or hanging.
#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QIcon>
#include <QTimer>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "app/heap_tuning.h"
#include "core/tuner/version.h"
#include "db/store.h"
#include "ui/main_window.h"
#include "ui/screenshot_tour.h"

namespace {

constexpr int kExitNoDisplay = 3;

// Qt aborts when its platform cannot start; find out first.
std::string missing_display() {
  auto env = [](const char* name) { return std::string(std::getenv(name) ? std::getenv(name) : ""); };
  const auto platform = env("QT_QPA_PLATFORM");
  if (!platform.empty()) return {};  // offscreen, vnc, ...: the user chose
  if (!env("WAYLAND_DISPLAY").empty()) return {};
  const auto display = env("DISPLAY");
  if (display.empty()) return "no display: neither DISPLAY nor WAYLAND_DISPLAY is set";
  // A local X display :N has its socket in /tmp/.X11-unix/XN.
  if (display[0] == ':') {
    const auto number = display.substr(1, display.find('.') - 1);
    if (!QFileInfo::exists(QString::fromStdString("/tmp/.X11-unix/X" + number)))
      return "no X server answers on DISPLAY=" + display;
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  commtune::tune_heap();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--version") {
      std::printf("%s", commtune::version_text().c_str());
      return 0;
    }
  }
  if (const auto why = missing_display(); !why.empty()) {
    std::fprintf(stderr,
                 "commtune: %s.\n"
                 "  Run it on a desktop, or without a screen with QT_QPA_PLATFORM=offscreen (or under xvfb-run),\n"
                 "  or use the command line: commtune-cli run | sweep | list | show | compare | export.\n",
                 why.c_str());
    return kExitNoDisplay;
  }

  QApplication app(argc, argv);
  QApplication::setOrganizationName("commtune");
  QApplication::setApplicationName("commtune");
  QApplication::setWindowIcon(QIcon::fromTheme("org.commtune.Commtune"));
  QApplication::setApplicationVersion(QString::fromStdString(commtune::version_text()).section('\n', 0, 0));
  QApplication::setDesktopFileName("org.commtune.Commtune");  // packaging/org.commtune.Commtune.desktop

  QCommandLineParser parser;
  parser.setApplicationDescription("Tune and visualise how data-parallel training communicates gradients.");
  parser.addHelpOption();
  parser.addOption({"version", "Print the version, the libtorch version and the accelerator support."});
  parser.addOption(
      {"db", "The run store (SQLite); default $COMMTUNE_DB, else ~/.local/share/commtune/runs.db.", "path"});
  parser.addOption(
      {"screenshots", "Run the sweep in <spec>, save a screenshot of each main view into <dir>, quit.", "dir"});
  parser.addOption({"spec", "The sweep spec the screenshots run.", "spec"});
  parser.addOption({"quit-when-shown", "Quit once the window has been shown and its first events handled "
                                       "(how bench/tuner_start_bench.py times the first window)."});
  parser.process(app);

  QString store;
  try {
    store = parser.isSet("db") ? parser.value("db") : QString::fromStdString(commtune::db::default_store_path());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "commtune: %s\n", e.what());
    return 1;
  }
  commtune::ui::MainWindow window(store);
  window.show();
  if (parser.isSet("screenshots")) {
    if (!parser.isSet("spec")) {
      std::fprintf(stderr, "commtune: --screenshots needs --spec SWEEP.json\n");
      return 2;
    }
    window.resize(1440, 900);
    commtune::ui::take_screenshots(window, parser.value("spec"), parser.value("screenshots"),
                                   [](int code) { QApplication::exit(code); });
  }
  if (parser.isSet("quit-when-shown")) QTimer::singleShot(0, &app, [] { QApplication::quit(); });
  return app.exec();
}
