#include "ui/main_window.h"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QFileDialog>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QScreen>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTimer>
#include <algorithm>

#include "core/tuner/io/input_file.h"
#include "core/tuner/io/output_file.h"
#include "core/tuner/version.h"
#include "ui/engine_session.h"
#include "ui/forms/config_form.h"
#include "ui/forms/sweep_editor.h"
#include "ui/forms/wheel_guard.h"
#include "ui/pages/analysis_page.h"
#include "ui/pages/dashboard_page.h"
#include "ui/pages/launch_page.h"
#include "ui/pages/runs_page.h"
#include "ui/plot/run_plots.h"

namespace commtune::ui {

MainWindow::MainWindow(const QString& store_path, QWidget* parent) : QMainWindow(parent) {
  setObjectName("commtune:main");
  setWindowTitle("commtune");
  qApp->installEventFilter(new WheelGuard(this));  // before the pages: it sees their fields polished
  engine_ = new EngineSession(store_path, this);
  launch_ = new LaunchPage(this);
  dashboard_ = new DashboardPage(*engine_, this);
  runs_ = new RunsPage(store_path, this);
  analysis_ = new AnalysisPage(store_path, this);
  tabs_ = new QTabWidget(this);
  tabs_->setObjectName("commtune:pages");
  tabs_->setDocumentMode(true);
  tabs_->addTab(launch_, "Launch");
  tabs_->addTab(dashboard_, "Dashboard");
  tabs_->addTab(runs_, "Runs");
  tabs_->addTab(analysis_, "Analysis");
  setCentralWidget(tabs_);
  statusBar()->showMessage("Run store: " + store_path);

  connect(launch_, &LaunchPage::run_requested, this, &MainWindow::start_run);
  connect(launch_, &LaunchPage::sweep_requested, this, &MainWindow::start_sweep);
  connect(analysis_, &AnalysisPage::resume_requested, this, [this](qint64 sweep_id) {
    launch_job(QString("sweep %1 again").arg(sweep_id), [this, sweep_id] { engine_->resume_sweep(sweep_id); });
  });
  connect(engine_, &EngineSession::run_finished, this, [this] { runs_->refresh(); });
  connect(analysis_, &AnalysisPage::open_runs_requested, this, [this](const std::vector<std::int64_t>& ids) {
    runs_->open_runs(ids);
    show_page(kRuns);
  });
  // The runs list reads the store again when it changes (here or in another
  // process): a new or finished sweep then shows on Analysis too.
  connect(runs_, &RunsPage::loaded, this, [this] {
    if (tabs_->currentIndex() == kAnalysis) analysis_->refresh();
  });
  connect(runs_, &RunsPage::store_changed, analysis_, &AnalysisPage::refresh);

  // A click on a curve or a point opens its run(s) on the Runs page (Analysis: open_runs_requested above).
  connect(dashboard_->plots(), &RunPlots::runs_clicked, this, [this](const std::vector<std::int64_t>& run_ids) {
    runs_->open_runs(run_ids);
    show_page(kRuns);
  });
  connect(analysis_, &AnalysisPage::dashboard_requested, this, [this](qint64 sweep_id) {
    dashboard_->show_sweep(sweep_id);
    show_page(kDashboard);
  });
  connect(runs_, &RunsPage::watch_live, this, [this](qint64 run_id) {
    dashboard_->follow_stored_run(run_id);
    show_page(kDashboard);
  });
  connect(engine_, &EngineSession::job_finished, this, [this](const QString& message, bool ok) {
    launch_->set_engine_busy(false);
    report(message, !ok);
    runs_->refresh();
    analysis_->refresh();
  });
  connect(tabs_, &QTabWidget::currentChanged, this, [this](int index) {
    if (index == kAnalysis) analysis_->refresh();
  });
  build_menus();
  restore_settings();
  analysis_->refresh();
}

MainWindow::~MainWindow() = default;

QWidget* MainWindow::page(Page p) const { return tabs_->widget(p); }
void MainWindow::show_page(Page p) { tabs_->setCurrentIndex(p); }

void MainWindow::report(const QString& message, bool error) {
  statusBar()->showMessage(message, error ? 0 : 15000);
  if (error)
    statusBar()->setStyleSheet("color: #d9534f;");
  else
    statusBar()->setStyleSheet({});
}

void MainWindow::start_run() {
  launch_job("run", [this] {
    engine_->start_run(launch_->form()->raw(), launch_->findChild<QLineEdit*>("launch:run_name")->text());
  });
}

void MainWindow::start_sweep() {
  launch_job("sweep", [this] { engine_->start_sweep(launch_->sweep()->spec()); });
}

void MainWindow::launch_job(const QString& what, const std::function<void()>& start) {
  try {
    start();
    launch_->set_engine_busy(true);
    show_page(kDashboard);
    report("Started the " + what);
  } catch (const std::exception& e) {
    report("Cannot start the " + what + ": " + e.what(), true);
  }
}

void MainWindow::build_menus() {
  auto add = [this](QMenu* menu, const QString& text, const QKeySequence& keys, auto slot) {
    auto* action = menu->addAction(text);
    action->setShortcut(keys);
    connect(action, &QAction::triggered, this, slot);
    return action;
  };
  auto* file = menuBar()->addMenu("&File");
  add(file, "&Open configuration…", QKeySequence::Open, [this] {
    const auto path = QFileDialog::getOpenFileName(this, "Open a run configuration or sweep spec", {}, "JSON (*.json)");
    if (path.isEmpty()) return;
    try {
      launch_->load_json(read_json_file(path.toStdString()));
      show_page(kLaunch);
      report("Loaded " + path);
    } catch (const std::exception& e) {
      report("Cannot load " + path + ": " + e.what(), true);
    }
  });
  add(file, "&Save configuration…", QKeySequence::Save, [this] {
    const auto path =
        QFileDialog::getSaveFileName(this, "Save the configuration (or sweep spec)", "commtune.json", "JSON (*.json)");
    if (path.isEmpty()) return;
    try {
      write_file_whole(path.toStdString(), launch_->current_json().dump(2) + "\n");
      report("Saved " + path);
    } catch (const std::exception& e) {
      report("Cannot save: " + QString::fromUtf8(e.what()), true);
    }
  });
  add(file, "&Export selected run…", QKeySequence("Ctrl+E"), [this] {
    show_page(kRuns);
    runs_->export_selected();
  });
  file->addSeparator();
  add(file, "&Quit", QKeySequence::Quit, [this] { close(); });

  auto* run = menuBar()->addMenu("&Run");
  // Starts at once when the form is valid; otherwise shows it, with the problem outlined.
  auto start_or_show = [this](bool sweep) {
    launch_->show_sweep(sweep);
    if (!(sweep ? launch_->sweep_button() : launch_->run_button())->isEnabled()) return show_page(kLaunch);
    sweep ? start_sweep() : start_run();
  };
  add(run, "Start &run", QKeySequence("Ctrl+R"), [start_or_show] { start_or_show(false); });
  add(run, "Start &sweep", QKeySequence("Ctrl+Shift+R"), [start_or_show] { start_or_show(true); });
  add(run, "S&top all", QKeySequence("Ctrl+."), [this] { dashboard_->stop_all(); });

  auto* view = menuBar()->addMenu("&View");
  const QStringList names{"&Launch", "&Dashboard", "&Runs", "&Analysis"};
  for (int i = 0; i < names.size(); ++i)
    add(view, names[i], QKeySequence(QString("Ctrl+%1").arg(i + 1)), [this, i] { show_page(static_cast<Page>(i)); });
  view->addSeparator();
  add(view, "Re&fresh", QKeySequence::Refresh, [this] {
    runs_->refresh();
    analysis_->refresh();
  });
  add(view, "&Find runs", QKeySequence::Find, [this] {
    show_page(kRuns);
    runs_->search()->setFocus();
    runs_->search()->selectAll();
  });
  auto* theme_menu = view->addMenu("&Theme");
  themes_ = new QActionGroup(this);
  for (auto choice : {ThemeChoice::System, ThemeChoice::Light, ThemeChoice::Dark}) {
    auto* action = theme_menu->addAction(to_string(choice));
    action->setCheckable(true);
    action->setData(to_string(choice));
    themes_->addAction(action);
    connect(action, &QAction::triggered, this, [this, choice] { set_theme(choice); });
  }

  auto* help = menuBar()->addMenu("&Help");
  add(help, "&About commtune", QKeySequence(), [this] {
    QMessageBox::about(this, "About commtune",
                       "<p>Tune and visualise how data-parallel training communicates gradients.</p><pre>" +
                           QString::fromStdString(version_text()).toHtmlEscaped() + "</pre>");
  });
}

void MainWindow::set_theme(ThemeChoice choice) {
  theme_ = choice;
  restyling_ = true;
  const Theme t = apply_theme(*qApp, choice);
  restyling_ = false;
  for (auto* action : themes_->actions()) action->setChecked(action->data().toString() == to_string(choice));
  dashboard_->plots()->apply_theme(t);
  runs_->plots()->apply_theme(t);
  analysis_->apply_theme(t);
}

void MainWindow::changeEvent(QEvent* event) {
  // The desktop switched between light and dark: follow it.
  if (event->type() == QEvent::ApplicationPaletteChange && theme_ == ThemeChoice::System && !restyling_) {
    const Theme t = current_theme();
    dashboard_->plots()->apply_theme(t);
    runs_->plots()->apply_theme(t);
    analysis_->apply_theme(t);
  }
  QMainWindow::changeEvent(event);
}

void MainWindow::fit_into_screen() {
  const auto* screen = QGuiApplication::screenAt(frameGeometry().center());
  if (!screen) screen = this->screen();
  if (!screen) return;
  const QRect room = screen->availableGeometry();
  const QSize frame = frameGeometry().size() - geometry().size();  // the window manager's title bar and borders
  resize(size().boundedTo(room.size() - frame));
  const QSize outer = size() + frame;
  move(std::clamp(frameGeometry().x(), room.left(), std::max(room.left(), room.right() + 1 - outer.width())),
       std::clamp(frameGeometry().y(), room.top(), std::max(room.top(), room.bottom() + 1 - outer.height())));
}

void MainWindow::showEvent(QShowEvent* event) {
  QMainWindow::showEvent(event);
  // The restored geometry, fitted again once the window manager has framed
  // it; a size the program set since (a screenshot's) stays as it was set.
  if (!restored_size_ || size() != *restored_size_) return;
  restored_size_.reset();
  fit_into_screen();
  QTimer::singleShot(0, this, [this] { fit_into_screen(); });
}

void MainWindow::restore_settings() {
  QSettings s;
  // Saved on another screen, or none saved: inside this one's available area, always (fit_into_screen).
  if (!restoreGeometry(s.value("window/geometry").toByteArray())) resize(1360, 860);
  fit_into_screen();
  restored_size_ = size();
  restoreState(s.value("window/state").toByteArray());
  for (auto* splitter : findChildren<QSplitter*>())
    if (!splitter->objectName().isEmpty())
      splitter->restoreState(s.value("splitters/" + splitter->objectName()).toByteArray());
  tabs_->setCurrentIndex(s.value("window/page", 0).toInt());
  set_theme(theme_from_string(s.value("view/theme", "system").toString()));
  const auto saved = s.value("launch/config").toString().toStdString();
  if (!saved.empty()) {
    try {
      launch_->load_json(nlohmann::json::parse(saved));
    } catch (const std::exception& e) {
      report(QString("The saved configuration no longer loads (") + e.what() + "); starting from defaults", true);
    }
  }
}

void MainWindow::save_settings() const {
  QSettings s;
  s.setValue("window/geometry", saveGeometry());
  s.setValue("window/state", saveState());
  s.setValue("window/page", tabs_->currentIndex());
  s.setValue("view/theme", to_string(theme_));
  for (auto* splitter : findChildren<QSplitter*>())
    if (!splitter->objectName().isEmpty()) s.setValue("splitters/" + splitter->objectName(), splitter->saveState());
  try {
    s.setValue("launch/config", QString::fromStdString(launch_->current_json().dump()));
  } catch (const std::exception&) {  // an unfinished sweep axis: keep the last one that was whole
  }
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (engine_->busy()) {
    const auto answer = QMessageBox::question(this, "Quit commtune",
                                              "A run is going. Stop it and quit? It stays in the store as cancelled.");
    if (answer != QMessageBox::Yes) return event->ignore();
    engine_->stop_all();
  }
  save_settings();
  event->accept();
}

}  // namespace commtune::ui
