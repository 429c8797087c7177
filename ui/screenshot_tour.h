// Drives the real window through its main views and saves a screenshot of
// each (scripts/screenshots.sh, for the README): loads a sweep spec, runs it,
// then captures Launch, Dashboard, Runs (every trial opened), Analysis and its
// parallel coordinates and importance, in the light theme and again in the
// dark one (files ending in -dark).
#pragma once

#include <QString>
#include <functional>

namespace commtune::ui {

class MainWindow;

// Calls `done(exit_code)` when every screenshot is written or something failed.
void take_screenshots(MainWindow& window, const QString& spec_path, const QString& out_dir,
                      std::function<void(int)> done);

}  // namespace commtune::ui
