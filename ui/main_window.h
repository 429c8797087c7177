// The desktop app's window: Launch, Dashboard, Runs and Analysis pages over
// one engine session and one run store, with menus and shortcuts for what
// users do most, a remembered layout, and a theme that follows the system
// unless the user picks light or dark.
#pragma once

#include <QMainWindow>
#include <QSize>

#include <optional>
#include <functional>

#include "ui/theme.h"

class QTabWidget;
class QActionGroup;

namespace commtune::ui {

class AnalysisPage;
class DashboardPage;
class EngineSession;
class LaunchPage;
class RunsPage;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  enum Page { kLaunch = 0, kDashboard, kRuns, kAnalysis };
  explicit MainWindow(const QString& store_path, QWidget* parent = nullptr);
  ~MainWindow() override;

  EngineSession& engine() const { return *engine_; }
  LaunchPage* launch() const { return launch_; }
  DashboardPage* dashboard() const { return dashboard_; }
  RunsPage* runs() const { return runs_; }
  AnalysisPage* analysis() const { return analysis_; }
  void show_page(Page page);
  QWidget* page(Page page) const;
  void set_theme(ThemeChoice choice);

  void start_run();
  void start_sweep();

 protected:
  void closeEvent(QCloseEvent* event) override;
  void changeEvent(QEvent* event) override;
  void showEvent(QShowEvent* event) override;

 private:
  void build_menus();
  // Brings the window inside the available area of the screen it opens on.
  void fit_into_screen();
  void restore_settings();
  void save_settings() const;
  void report(const QString& message, bool error = false);
  void launch_job(const QString& what, const std::function<void()>& start);

  EngineSession* engine_;
  QTabWidget* tabs_;
  LaunchPage* launch_;
  DashboardPage* dashboard_;
  RunsPage* runs_;
  AnalysisPage* analysis_;
  QActionGroup* themes_ = nullptr;
  ThemeChoice theme_ = ThemeChoice::System;
  std::optional<QSize> restored_size_;  // what restore_settings left, until the first show fits it again
  bool restyling_ = false;
};

}  // namespace commtune::ui
