// The desktop app driven as a user would, on the real window (offscreen, or
// under Xvfb): forms from the schema with inline validation, a 2-rank CPU
// run launched from the form whose points reach the plots, stopped from the
// dashboard, found in the run browser and exported as a PowerSGDState file
// that PyTorch loads; a sweep from the form, its analysis, themes and the
// remembered layout; a plugin's hook and compressor in the forms; a sweep of
// 30 trials on every page: the trial list, smoothing, log axes, filters,
// tags, deletion, parallel coordinates and parameter importance.
#include <QCheckBox>
#include <array>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileInfo>
#include <QGroupBox>
#include <QLineEdit>
#include <QProcess>
#include <QRegularExpression>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QListWidget>
#include <QAbstractItemView>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QInputDialog>
#include <QTimer>
#include <QLabel>
#include <QScrollArea>
#include <QScrollBar>
#include <QTableView>
#include <QSpontaneKeyEvent>
#include <QWheelEvent>
#include <QtTest>
#include <sys/resource.h>

#include <csignal>
#include <cmath>
#include <set>
#include <tuple>

#include "core/tuner/launch/run_end.h"
#include "core/tuner/netmodel/network.h"
#include "core/tuner/store/run_metrics.h"
#include "core/tuner/verdict/sweep_figures.h"
#include "db/store.h"
#include "ui/engine_session.h"
#include "ui/export_dialog.h"
#include "ui/forms/config_form.h"
#include "ui/forms/param_field.h"
#include "ui/forms/sweep_editor.h"
#include "ui/main_window.h"
#include "ui/pages/analysis_page.h"
#include "ui/pages/dashboard_page.h"
#include "ui/pages/launch_page.h"
#include "ui/pages/runs_page.h"
#include "ui/plot/parallel_coordinates.h"
#include "ui/plot/qcustomplot.h"
#include "ui/plot/run_plots.h"
#include "ui/theme.h"

using namespace commtune::ui;

namespace {

// Starts a short run from the Launch page and waits until it has ended; its id.
constexpr int kOwnJobSteps = 30;
qint64 run_own_job(MainWindow& window) {
  auto* form = window.launch()->form();
  form->set_text("world_size", "1");
  form->set_text("steps", QString::number(kOwnJobSteps));
  form->set_text("model.hidden", "64");
  form->set_text("data.features", "32");
  QSignalSpy started(&window.engine(), &EngineSession::run_started);
  QSignalSpy finished(&window.engine(), &EngineSession::job_finished);
  window.launch()->run_button()->click();
  [&] { QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000); }();
  if (started.count() != 1) return -1;
  const auto id = started.at(0).at(0).value<RunStart>().run_id;
  [&] { QTRY_COMPARE_WITH_TIMEOUT(window.dashboard()->status_of(id), QString("succeeded"), 30000); }();
  return id;
}

// Types into a field the way a user does.
void type_into(ParamField* field, const QString& text) {
  QVERIFY2(field, "no such field");
  if (auto* line = field->findChild<QLineEdit*>()) {
    line->selectAll();
    QTest::keyClicks(line, text);
    if (line->text() != text) line->setText(text);
  } else if (auto* combo = field->findChild<QComboBox*>()) {
    combo->setCurrentText(text);
  } else if (auto* check = field->findChild<QCheckBox*>()) {
    check->setChecked(text == "true");
  }
}

// A wheel notch (down) over a widget, delivered as the window system would:
// through the application, so filters and propagation to parents apply.
void wheel_over(QWidget* widget) {
  const QPointF at(widget->width() / 2.0, widget->height() / 2.0);
  QWheelEvent event(at, widget->mapToGlobal(at), QPoint(), QPoint(0, -120), Qt::NoButton, Qt::NoModifier,
                    Qt::NoScrollPhase, false);
  // As from the window system: Qt propagates only spontaneous wheel events,
  // and sendEvent() would mark it otherwise.
  QSpontaneKeyEvent::setSpontaneous(&event);
  QApplication::instance()->notify(widget, &event);
}

// CIELAB lightness and opponent axes of a colour (sRGB, D65).
std::array<double, 3> lab(const QColor& c) {
  auto linear = [](double v) { return v <= 0.04045 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4); };
  const double r = linear(c.redF()), g = linear(c.greenF()), b = linear(c.blueF());
  const double x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, y = 0.2126 * r + 0.7152 * g + 0.0722 * b,
               z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883;
  auto f = [](double t) { return t > 216.0 / 24389 ? std::cbrt(t) : (24389.0 / 27 * t + 16) / 116; };
  return {116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))};
}

// A finished sweep of PowerSGD trials written straight into the store, as a
// sweep leaves it: rank x start iteration, a tail loss that depends on the
// rank only, MB per step spanning three decades. Returns the sweep's id.
std::int64_t seed_sweep(const QString& path, const std::vector<int>& ranks, const std::vector<int>& starts) {
  namespace db = commtune::db;
  db::Store s(path.toStdString());
  db::Transaction transaction(s.connection());
  const nlohmann::json spec = {
      {"base", {{"world_size", 2}, {"steps", 100}, {"hook", {{"name", "powersgd"}, {"start_powerSGD_iter", 2}}}}},
      {"axes", {{"hook.matrix_approximation_rank", ranks}, {"hook.start_powerSGD_iter", starts}}},
      {"baseline", false}};
  const auto sweep = s.create_sweep("", spec);
  int trial = 0;
  for (const int rank : ranks)
    for (const int start : starts) {
      db::NewRun run;
      run.sweep_id = sweep;
      run.trial = trial++;
      run.name = "matrix_approximation_rank=" + std::to_string(rank) + " start_powerSGD_iter=" + std::to_string(start);
      run.config = {{"world_size", 2},
                    {"steps", 100},
                    {"hook",
                     {{"name", "powersgd"},
                      {"matrix_approximation_rank", rank},
                      {"start_powerSGD_iter", start},
                      {"use_error_feedback", true}}}};
      run.world_size = 2;
      run.steps_requested = 100;
      const auto id = s.create_run(run, db::status::kSucceeded);
      double loss = 0;
      for (int step = 0; step < 100; ++step)
        for (int r = 0; r < 2; ++r) {
          db::StepRow row;
          row.run_id = id;
          row.rank = r;
          row.step = step;
          row.wall_s = step * 0.01;
          loss = 1.0 + 1.0 / rank + std::exp(-step / 20.0);
          row.loss = loss;
          row.t_forward = 0.002, row.t_backward = 0.004, row.t_step = 0.01;
          row.wire_bytes = static_cast<std::uint64_t>(1000 * rank);
          row.uncompressed_bytes = 4000000;
          s.insert(row);
        }
      commtune::finish_run_with_digest(s, id, {db::status::kSucceeded, "", 100, loss, 1.0, nullptr, nullptr, ""});
    }
  s.set_sweep_status(sweep, db::status::kSucceeded);
  transaction.commit();
  return sweep;
}

// A finished 2-rank run of `steps` steps at a constant loss, written into the store.
std::int64_t store_flat_run(commtune::db::Store& s, commtune::db::NewRun run, int steps, double loss) {
  namespace db = commtune::db;
  run.world_size = 2;
  run.steps_requested = steps;
  const auto id = s.create_run(run, db::status::kSucceeded);
  for (int step = 0; step < steps; ++step)
    for (int r = 0; r < 2; ++r) {
      db::StepRow row;
      row.run_id = id;
      row.rank = r;
      row.step = step;
      row.loss = loss;
      row.t_step = 0.01;
      s.insert(row);
    }
  commtune::finish_run_with_digest(s, id, {db::status::kSucceeded, "", steps, loss, 1.0, nullptr, nullptr, ""});
  return id;
}

// Runs of several hooks written straight into the store: BytePS with each
// compressor (their configurations all name byteps_compressor_randomk_rescale),
// allreduce and PowerSGD at rank 2, each with a tail loss of its own.
std::vector<std::int64_t> seed_mixed_runs(const QString& path) {
  namespace db = commtune::db;
  db::Store s(path.toStdString());
  std::vector<std::int64_t> ids;
  const auto sweep = s.create_sweep(
      "", {{"base", {{"world_size", 2}, {"steps", 20}}},
           {"axes", {{"hook.name", {"byteps", "allreduce", "powersgd"}},
                     {"hook.byteps_compressor_type", {"onebit", "topk", "randomk"}}}}});
  const std::vector<std::pair<nlohmann::json, double>> hooks{
      {{{"name", "byteps"}, {"byteps_compressor_type", "onebit"}, {"byteps_compressor_randomk_rescale", false}}, 1.2},
      {{{"name", "byteps"}, {"byteps_compressor_type", "topk"}, {"byteps_compressor_randomk_rescale", false}}, 1.1},
      {{{"name", "byteps"}, {"byteps_compressor_type", "randomk"}, {"byteps_compressor_randomk_rescale", true}}, 1.4},
      {{{"name", "allreduce"}}, 1.0},
      {{{"name", "powersgd"}, {"matrix_approximation_rank", 2}, {"start_powerSGD_iter", 10}}, 1.05}};
  for (const auto& [hook, level] : hooks) {
    db::NewRun run;
    run.config = {{"world_size", 2}, {"steps", 20}, {"hook", hook}, {"optimizer", {{"lr", 0.1 + 0.2}}}};
    run.sweep_id = sweep;
    run.trial = static_cast<std::int64_t>(ids.size());
    ids.push_back(store_flat_run(s, run, 20, level));
  }
  return ids;
}

// What `commtune-cli ARGS` prints as JSON; null when it fails.
nlohmann::json cli_json(const QStringList& args) {
  const auto cli = QFileInfo(qEnvironmentVariable("COMMTUNE_WORKER")).dir().filePath("commtune-cli");
  QProcess p;
  p.start(cli, args);
  if (!p.waitForFinished(60000) || p.exitCode() != 0) return nullptr;
  return nlohmann::json::parse(p.readAllStandardOutput().toStdString(), nullptr, false);
}

// The ids `commtune-cli list --search QUERY` prints, or its error.
QString cli_search(const QString& store, const QString& query) {
  const auto cli = QFileInfo(qEnvironmentVariable("COMMTUNE_WORKER")).dir().filePath("commtune-cli");
  QProcess p;
  p.start(cli, {"--db", store, "list", "--json", "--search", query});
  if (!p.waitForFinished(60000)) return "timeout";
  if (p.exitCode() != 0) return "exit " + QString::number(p.exitCode()) + ": " + QString::fromUtf8(p.readAllStandardError());
  QStringList ids;
  for (const auto& run : nlohmann::json::parse(p.readAllStandardOutput().toStdString()))
    ids << QString::number(run["id"].get<std::int64_t>());
  return ids.join(",");
}

// The window shown on its Analysis page, analysing `sweep` (the analysis runs on).
AnalysisPage* analyse_sweep(MainWindow& window, std::int64_t sweep) {
  window.show();
  window.show_page(MainWindow::kAnalysis);
  window.analysis()->select_sweep(sweep);
  window.analysis()->refresh();
  return window.analysis();
}

// The window shown on its Runs page, the store read again.
RunsPage* show_runs_page(MainWindow& window) {
  window.show();
  window.show_page(MainWindow::kRuns);
  window.runs()->refresh();
  return window.runs();
}

QString visible_ids(RunsPage* runs) {
  std::vector<std::int64_t> ids;
  auto* model = runs->table()->model();
  for (int row = 0; row < model->rowCount(); ++row) ids.push_back(model->index(row, 0).data().toLongLong());
  std::sort(ids.begin(), ids.end());
  QStringList out;
  for (auto id : ids) out << QString::number(id);
  return out.join(",");
}

// Answers the next modal question (a QMessageBox) with `button`, keeping its text.
std::shared_ptr<QString> answer_next_question(QMessageBox::StandardButton button) {
  auto text = std::make_shared<QString>();
  auto* timer = new QTimer;
  timer->setInterval(20);
  QObject::connect(timer, &QTimer::timeout, [timer, button, text] {
    if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
      *text = box->text();
      timer->stop();
      timer->deleteLater();
      box->button(button)->click();
    }
  });
  timer->start();
  return text;
}

// Answers the next QInputDialog with `answer`, keeping the text it offered first.
std::shared_ptr<QString> answer_next_input(const QString& answer) {
  auto offered = std::make_shared<QString>();
  auto* timer = new QTimer;
  timer->setInterval(20);
  QObject::connect(timer, &QTimer::timeout, [timer, answer, offered] {
    if (auto* dialog = qobject_cast<QInputDialog*>(QApplication::activeModalWidget())) {
      *offered = dialog->textValue();
      timer->stop();
      timer->deleteLater();
      dialog->setTextValue(answer);
      dialog->accept();
    }
  });
  timer->start();
  return offered;
}

// Accepts the next dialog that edits notes (a QPlainTextEdit), keeping the notes it offered.
std::shared_ptr<QString> accept_next_notes() {
  auto offered = std::make_shared<QString>();
  auto* timer = new QTimer;
  timer->setInterval(20);
  QObject::connect(timer, &QTimer::timeout, [timer, offered] {
    if (auto* dialog = qobject_cast<QDialog*>(QApplication::activeModalWidget()))
      if (auto* notes = dialog->findChild<QPlainTextEdit*>()) {
        *offered = notes->toPlainText();
        timer->stop();
        timer->deleteLater();
        dialog->accept();
      }
  });
  timer->start();
  return offered;
}

// A random-search sweep written into the store: learning rates and momenta
// drawn, not on a grid; the loss is lowest near lr 0.01, momentum 0.5.
std::int64_t seed_drawn_sweep(const QString& path) {
  namespace db = commtune::db;
  db::Store s(path.toStdString());
  const auto sweep = s.create_sweep(
      "", {{"base", {{"world_size", 2}, {"steps", 20}}},
           {"strategy", "random"},
           {"trials", 12},
           {"baseline", false},
           {"axes",
            {{"optimizer.lr", {{"min", 0.001}, {"max", 0.1}, {"log", true}}},
             {"optimizer.momentum", {{"min", 0.0}, {"max", 0.9}}}}}});
  for (int trial = 0; trial < 12; ++trial) {
    const double lr = 0.001 * std::pow(100.0, std::fmod(trial * 0.618, 1.0));
    const double momentum = 0.9 * std::fmod(trial * 0.382 + 0.1, 1.0);
    const double loss = 1.0 + std::pow(std::log10(lr) + 2, 2) + std::pow(momentum - 0.5, 2);
    db::NewRun run;
    run.sweep_id = sweep;
    run.trial = trial;
    run.config = {{"world_size", 2}, {"steps", 20}, {"optimizer", {{"lr", lr}, {"momentum", momentum}}}};
    store_flat_run(s, run, 20, loss);
  }
  s.set_sweep_status(sweep, db::status::kSucceeded);
  return sweep;
}

// 40 steps of one run into the plots: `loss(step)`, 4 MB a step before compression, `wire(step)` sent.
template <class Loss, class Wire>
void feed_run(RunPlots& plots, std::int64_t run_id, Loss loss, Wire wire) {
  for (int step = 0; step < 40; ++step) {
    LivePoint p;
    p.run_id = run_id;
    p.step = step;
    p.wall_s = step * 0.1;
    p.loss = loss(step);
    p.uncompressed_bytes = 4e6;
    p.wire_bytes = wire(step);
    plots.append(p);
  }
}

// The column of `table` under `header`, or -1.
int column_of(QTableWidget* table, const QString& header) {
  for (int c = 0; c < table->columnCount(); ++c)
    if (table->horizontalHeaderItem(c)->text() == header) return c;
  return -1;
}

int header_width(RunsPage* runs, const QString& name) {
  auto* model = runs->table()->model();
  for (int c = 0; c < model->columnCount(); ++c)
    if (model->headerData(c, Qt::Horizontal).toString() == name) return runs->table()->columnWidth(c);
  return -1;
}

// How light a plot's background is, from its rendering.
double plot_lightness(QCustomPlot* plot) { return plot->toPixmap(200, 120).toImage().pixelColor(3, 3).lightnessF(); }

}  // namespace

class GuiTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString store() const { return dir_.filePath("runs.db"); }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    qputenv("XDG_CONFIG_HOME", dir_.filePath("config").toUtf8());  // QSettings: never the user's
    qputenv("COMMTUNE_PLUGIN_PATH", COMMTUNE_TEST_PLUGIN_DIR);     // before the catalog's first use
    QCoreApplication::setOrganizationName("commtune-test");
    QCoreApplication::setApplicationName("commtune-test");
  }

  // Each test starts at recommend's loss tolerance (1%), whatever the test before it left (the page keeps it).
  void init() { QSettings().remove("analysis/tolerance_percent"); }

  void form_checks_every_edit_and_names_the_field() {
    MainWindow window(store());
    window.show();
    auto* form = window.launch()->form();
    auto* steps = form->field("steps");
    QVERIFY(steps);
    QVERIFY(window.launch()->run_button()->isEnabled());
    type_into(steps, "0");
    QVERIFY(steps->has_error());
    QVERIFY2(form->problem().startsWith("steps:"), qPrintable(form->problem()));
    QVERIFY2(window.launch()->problem_text().contains("an integer from 1"),
             qPrintable(window.launch()->problem_text()));
    QVERIFY(!window.launch()->run_button()->isEnabled());
    type_into(steps, "25");
    QVERIFY(!steps->has_error());
    QVERIFY(window.launch()->run_button()->isEnabled());
    QCOMPARE(form->raw()["steps"].get<int>(), 25);

    // Choosing a hook brings its own parameters, with tooltips from the docs.
    QVERIFY(!form->field("hook.matrix_approximation_rank"));
    type_into(form->field("hook.name"), "powersgd");
    QTRY_VERIFY(form->field("hook.matrix_approximation_rank"));
    QVERIFY(form->field("hook.matrix_approximation_rank")->toolTip().contains("rank"));
    type_into(form->field("hook.start_powerSGD_iter"), "1");  // error feedback needs >= 2: a whole-config check
    QVERIFY2(form->problem().contains("start_powerSGD_iter"), qPrintable(form->problem()));
    QVERIFY(!window.launch()->run_button()->isEnabled());
    type_into(form->field("hook.start_powerSGD_iter"), "2");
    QVERIFY2(form->problem().isEmpty(), qPrintable(form->problem()));

    // A saved configuration loads back into the same fields.
    const auto raw = form->raw();
    MainWindow other(store());
    other.launch()->load_json(raw);
    QCOMPARE(other.launch()->form()->field("hook.start_powerSGD_iter")->text(), QString("2"));
    QCOMPARE(other.launch()->form()->raw(), raw);
  }

  // A run that filled the disk ends the store's writer; the next launch opens
  // the store again and takes what room there is by then. The disk is a
  // file-size limit on this process (RLIMIT_FSIZE: write(2) fails past it as
  // on a full disk), raised again as a user frees space. The ranks are forked
  // from a zygote started by a first run, before the limit: they keep theirs.
  void a_store_that_ran_out_of_room_takes_the_next_run_once_there_is_room() {
    const auto path = dir_.filePath("room.db");
    MainWindow window(path);
    window.show();
    const auto first = run_own_job(window);
    QVERIFY(first > 0);
    // The limit and the signal it raises, put back however the test ends.
    struct Room {
      struct rlimit limit {};
      void (*on_too_large)(int) = ::signal(SIGXFSZ, SIG_IGN);
      Room() { ::getrlimit(RLIMIT_FSIZE, &limit); }
      ~Room() {
        ::setrlimit(RLIMIT_FSIZE, &limit);
        ::signal(SIGXFSZ, on_too_large);
      }
    } room;
    struct rlimit tight = room.limit;
    // The store's journal (its writer is the first run's, still open) may not grow: the next commit fails.
    tight.rlim_cur = static_cast<rlim_t>(std::max<qint64>(QFileInfo(path + "-wal").size(), 16 * 1024));
    QCOMPARE(::setrlimit(RLIMIT_FSIZE, &tight), 0);
    auto* form = window.launch()->form();
    form->set_text("world_size", "1");
    form->set_text("steps", "600");
    form->set_text("model.hidden", "64");
    form->set_text("data.features", "32");
    QSignalSpy finished(&window.engine(), &EngineSession::job_finished);
    window.launch()->run_button()->click();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 120000);
    const auto message = finished.at(0).at(0).toString();
    QVERIFY2(message.contains("the run store") && message.contains("stopped writing"), qPrintable(message));
    QCOMPARE(::setrlimit(RLIMIT_FSIZE, &room.limit), 0);  // room again
    QTRY_VERIFY(window.launch()->run_button()->isEnabled());  // the page has heard that the job ended
    {
      commtune::db::Store store(path.toStdString(), commtune::db::Store::Access::ReadOnly);
      for (const auto& run : store.runs())  // the run that met the full disk, if its row got in, did not succeed
        if (run.id != first) QVERIFY2(run.status != commtune::db::status::kSucceeded, run.status.c_str());
    }
    const auto next = run_own_job(window);
    QVERIFY(next > first);
    commtune::db::Store store(path.toStdString(), commtune::db::Store::Access::ReadOnly);
    QVERIFY2(store.run(next)->status == commtune::db::status::kSucceeded, store.run(next)->reason.c_str());
    QCOMPARE(store.run(next)->steps_completed, std::int64_t{kOwnJobSteps});
  }

  // Whatever the screen (1366x768 under Xvfb in gui.laptop), the window opens
  // inside its available area: with no saved settings, and with a geometry
  // saved on a taller screen that would put its bottom rows below this one.
  void the_window_opens_inside_the_screen() {
    QSettings().remove("window");
    const auto inside = [](MainWindow& window) {
      window.show();
      QVERIFY(QTest::qWaitForWindowExposed(&window));
      const auto room = window.screen()->availableGeometry();
      // A screen smaller than the window can be (the offscreen platform's 800x800) gets its top left corner.
      const auto least = window.minimumSizeHint();
      if (least.width() > room.width() || least.height() > room.height()) {
        QTRY_COMPARE(window.frameGeometry().topLeft(), room.topLeft());
        return;
      }
      QTRY_VERIFY2(room.contains(window.frameGeometry()),
                   qPrintable(QString("window %1,%2 %3x%4 on a screen of %5x%6")
                                  .arg(window.frameGeometry().x()).arg(window.frameGeometry().y())
                                  .arg(window.frameGeometry().width()).arg(window.frameGeometry().height())
                                  .arg(room.width()).arg(room.height())));
    };
    {
      MainWindow window(store());
      inside(window);
    }
    {
      MainWindow taller(store());
      taller.setGeometry(40, 20, 1360, 2000);  // as a 1440-row screen saved it
      QSettings().setValue("window/geometry", taller.saveGeometry());
    }
    MainWindow window(store());
    inside(window);
  }

  void scrolling_the_form_never_changes_a_field() {
    MainWindow window(store());
    window.resize(1300, 700);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    auto* form = window.launch()->form();
    auto* data = form->field("data.name")->findChild<QComboBox*>();
    auto* scroll = window.launch()->findChild<QScrollArea*>();
    QVERIFY(data && scroll);
    const auto before = data->currentText();
    const int scrolled = scroll->verticalScrollBar()->value();
    for (int notch = 0; notch < 4; ++notch) wheel_over(data);
    QCOMPARE(data->currentText(), before);  // the field keeps its value ...
    if (scroll->verticalScrollBar()->maximum() > 0)  // ... and the wheel scrolls the form instead
      QVERIFY(scroll->verticalScrollBar()->value() > scrolled);
    QVERIFY(data->focusPolicy() != Qt::WheelFocus);  // nor does the wheel give it focus
    // Clicked into, the field takes the wheel as a choice list does.
    window.activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(&window));
    data->setFocus(Qt::MouseFocusReason);
    QTRY_VERIFY(data->hasFocus());
    wheel_over(data);
    QVERIFY(data->currentText() != before);

    // The status speaks for the whole configuration: a file dataset needs its folder.
    form->set_text("data.name", "cifar10");
    QVERIFY2(form->problem().startsWith("data.path:"), qPrintable(form->problem()));
    QVERIFY(!window.launch()->run_button()->isEnabled());
    QVERIFY(!window.launch()->problem_text().contains("Ready"));
    form->set_text("data.name", "synthetic");
    QVERIFY2(form->problem().isEmpty(), qPrintable(form->problem()));

    // The hook is the first thing on the page, not below the fold.
    auto* hook = window.launch()->findChild<QWidget*>("group:Communication hook");
    QVERIFY(hook);
    for (auto* group : window.launch()->findChildren<QGroupBox*>())
      if (group != hook && group->isVisible()) QVERIFY(hook->mapTo(form, QPoint()).y() <= group->mapTo(form, QPoint()).y());
  }

  void thirty_trials_stay_readable() {
    QTemporaryDir dir;
    const auto path = dir.filePath("runs.db");
    const auto sweep = seed_sweep(path, {1, 2, 4, 8, 16}, {2, 10, 50, 100, 200, 400});
    MainWindow window(path);
    window.resize(1400, 900);
    window.show();
    window.set_theme(ThemeChoice::Light);

    // The runs table is a tuner's: metrics and swept parameters as columns.
    auto* runs = window.runs();
    runs->refresh();
    QTRY_VERIFY(!runs->loading());
    QCOMPARE(runs->visible_runs(), 30);
    QStringList headers;
    auto* model = runs->table()->model();
    for (int c = 0; c < model->columnCount(); ++c) headers << model->headerData(c, Qt::Horizontal).toString();
    for (const char* column : {"tail loss", "ms/step", "MB/step", "compr.", "rank", "start iter", "tags"})
      QVERIFY2(headers.contains(column), qPrintable(headers.join(", ")));
    // A trial's name has room (not cut to "matrix_appro…"), each header shows once, and each swept
    // parameter's in full (not "_approximatio").
    QVERIFY(header_width(runs, "name") >= runs->table()->fontMetrics().horizontalAdvance(
                                              "matrix_approximation_rank=16 start_powerSGD_iter=40"));
    QCOMPARE(QSet<QString>(headers.begin(), headers.end()).size(), headers.size());
    auto* header = runs->table()->horizontalHeader();
    for (int c = 0; c < model->columnCount(); ++c)
      if (headers[c] == "rank" || headers[c] == "start iter")
        QVERIFY2(header->sectionSize(c) >= header->fontMetrics().horizontalAdvance(headers[c]),
                 qPrintable(headers[c] + QString(" in %1 px").arg(header->sectionSize(c))));

    // The column chooser: columns hidden by name, remembered across windows, and saved as views.
    runs->table()->set_column_visible("wall s", false);
    runs->table()->set_column_visible("created", false);
    QCOMPARE(runs->table()->hidden_columns(), (QStringList{"wall s", "created"}));
    runs->table()->save_view("compact");
    runs->table()->set_column_visible("wall s", true);
    QCOMPARE(runs->table()->hidden_columns(), QStringList{"created"});
    {
      MainWindow again(path);
      again.runs()->refresh();
      QTRY_VERIFY(!again.runs()->loading());
      QCOMPARE(again.runs()->table()->hidden_columns(), QStringList{"created"});
      QVERIFY(again.runs()->table()->views().contains("compact"));
      again.runs()->table()->apply_view("compact");
      QCOMPARE(again.runs()->table()->hidden_columns(), (QStringList{"wall s", "created"}));
      again.runs()->table()->set_column_visible("wall s", true);
      again.runs()->table()->set_column_visible("created", true);
    }
    runs->refresh();
    QTRY_VERIFY(!runs->loading());
    QVERIFY(runs->table()->hidden_columns().isEmpty());

    // Filtered by parameter, by metric, and refused with a reason.
    runs->search()->setText("hook.matrix_approximation_rank = 2");
    QCOMPARE(runs->visible_runs(), 6);
    runs->search()->setText("hook.matrix_approximation_rank >= 4, hook.start_powerSGD_iter = 10");
    QCOMPARE(runs->visible_runs(), 3);
    runs->search()->setText("tail_loss < 1.3");  // 1 + 1/rank + a little: ranks 4, 8, 16
    QCOMPARE(runs->visible_runs(), 18);
    runs->search()->setText("hook.use_error_feedback = true");  // stored as 1, shown and matched as true
    QCOMPARE(runs->visible_runs(), 30);
    runs->search()->setText("tail_loss = nan");  // nan is a word (a diverged run's loss), not a number equal to all
    QCOMPARE(runs->visible_runs(), 0);
    runs->search()->setText("loss < 1.3");  // which loss? A bare "loss" is refused, naming both
    QVERIFY2(runs->filter_problem().contains("tail_loss") && runs->filter_problem().contains("last_loss"),
             qPrintable(runs->filter_problem()));
    runs->search()->setText("rnk = 2");
    QVERIFY2(runs->filter_problem().contains("rnk"), qPrintable(runs->filter_problem()));
    runs->search()->clear();
    QVERIFY(runs->filter_problem().isEmpty());

    // Tags and notes, a sweep's name, deleting a run with its metrics.
    commtune::db::Store reader(path.toStdString(), commtune::db::Store::Access::ReadOnly);
    const auto ids = [&] {
      std::vector<std::int64_t> out;
      for (const auto& r : reader.runs()) out.push_back(r.id);
      return out;
    }();
    QSignalSpy loaded(runs, &RunsPage::loaded);
    runs->annotate(ids[3], "the keeper", "best, rank 1", "lowest loss at rank 1");
    QTRY_VERIFY(loaded.count() >= 1 && !runs->loading());
    runs->search()->setText("tag = best");
    QCOMPARE(runs->visible_runs(), 1);
    QCOMPARE(QString::fromStdString(reader.run(ids[3])->notes), QString("lowest loss at rank 1"));
    // The dialog offers the notes alone, and accepting it keeps them (it offered the name and the notes
    // together, so every save wrote the name into the notes once more).
    runs->table()->selectRow(0);
    QCOMPARE(runs->selected_runs(), (std::vector<std::int64_t>{ids[3]}));
    const auto offered_notes = accept_next_notes();
    runs->findChild<QPushButton*>("runs:annotate")->click();
    QCOMPARE(*offered_notes, QString("lowest loss at rank 1"));
    QTRY_VERIFY(!runs->loading());
    QTRY_COMPARE(QString::fromStdString(reader.run(ids[3])->notes), QString("lowest loss at rank 1"));
    runs->search()->clear();
    runs->rename_sweep(sweep, "rank x start");
    QTRY_COMPARE(QString::fromStdString(reader.sweep(sweep)->name), QString("rank x start"));
    QTRY_VERIFY(!runs->loading());
    // Renamed again from the menu's box, which starts from the name it has.
    const auto offered = answer_next_input("rank by start");
    runs->ask_to_rename_sweep(sweep);
    QCOMPARE(*offered, QString("rank x start"));
    QTRY_COMPARE(QString::fromStdString(reader.sweep(sweep)->name), QString("rank by start"));
    QTRY_VERIFY(!runs->loading());
    // The question names the runs it deletes.
    const auto deleted_name = QString::fromStdString(reader.run(ids[29])->name);
    const auto question = answer_next_question(QMessageBox::Yes);
    runs->ask_to_delete_runs({ids[29]});
    QVERIFY2(question->contains(QString("run %1 '%2'").arg(ids[29]).arg(deleted_name)), qPrintable(*question));
    QTRY_VERIFY(!reader.run(ids[29]));
    QTRY_COMPARE(runs->visible_runs(), 29);
    QCOMPARE(reader.count_steps(ids[29]), 0);

    // The parameter diff leads with what was swept, and booleans read as such.
    runs->open_runs({ids[0], ids[1], ids[6]});
    QTRY_VERIFY(!runs->loading());
    QTRY_VERIFY(runs->diff()->rowCount() >= 2);
    QSet<QString> leading{runs->diff()->item(0, 0)->text(), runs->diff()->item(1, 0)->text()};
    QCOMPARE(leading, (QSet<QString>{"hook.matrix_approximation_rank", "hook.start_powerSGD_iter"}));
    runs->findChild<QCheckBox*>("runs:only_differences")->setChecked(false);  // every parameter
    QTRY_VERIFY(!runs->loading());
    bool saw_boolean = false;
    for (int row = 0; row < runs->diff()->rowCount(); ++row)
      if (runs->diff()->item(row, 0)->text() == "hook.use_error_feedback") {
        QCOMPARE(runs->diff()->item(row, 1)->text(), QString("true"));
        saw_boolean = true;
      }
    QVERIFY(saw_boolean);
    QCOMPARE(runs->metrics()->rowCount(), 3);  // compare's metrics table

    // The curves: a trial list instead of a legend over the plot, hide and solo.
    std::vector<std::int64_t> all(ids.begin(), ids.end() - 1);
    runs->open_runs(all);
    QTRY_VERIFY(!runs->loading());
    auto* plots = runs->plots();
    QTRY_COMPARE(plots->run_list()->topLevelItemCount(), 29);
    QStringList legend_columns;
    for (int c = 0; c < plots->run_list()->columnCount(); ++c) legend_columns << plots->run_list()->headerItem()->text(c);
    QCOMPARE(legend_columns, (QStringList{"run", "rank", "start iter", "trial"}));  // swept values as columns
    QCOMPARE(plots->run_list()->topLevelItem(0)->text(1), QString("1"));
    // The renamed run keeps its values in the list (its name has no rank=...).
    bool keeper_listed = false;
    for (int i = 0; i < plots->run_list()->topLevelItemCount(); ++i)
      if (auto* item = plots->run_list()->topLevelItem(i); item->text(0) == QString::number(ids[3])) {
        keeper_listed = true;
        QCOMPARE(item->text(1), QString::number(reader.run(ids[3])->config["hook"]["matrix_approximation_rank"].get<int>()));
        QVERIFY2(item->text(3).contains("the keeper"), qPrintable(item->text(3)));
      }
    QVERIFY(keeper_listed);
    QVERIFY(!plots->loss_plot()->legend->visible());
    plots->run_list()->topLevelItem(0)->setCheckState(0, Qt::Unchecked);  // as a click on its box
    QVERIFY(!plots->run_visible(all[0]));
    QVERIFY(!plots->loss_graph(all[0])->visible());
    plots->solo(all[5]);
    int shown = 0;
    for (const auto id : all) shown += plots->loss_graph(id)->visible();
    QCOMPARE(shown, 1);
    QVERIFY(plots->loss_graph(all[5])->visible());
    plots->solo(all[5]);  // again: everything
    QVERIFY(plots->run_visible(all[0]) && plots->run_visible(all[28]));
    plots->highlight(all[2]);
    QVERIFY(plots->loss_graph(all[2])->pen().widthF() > plots->loss_graph(all[3])->pen().widthF());
    QVERIFY(plots->loss_graph(all[3])->pen().color().alpha() < 255);
    plots->highlight(-1);

    // Hovering a curve reads its run, step and value.
    plots->refresh(true);
    plots->loss_plot()->replot(QCustomPlot::rpImmediateRefresh);
    const auto point = plots->loss_graph(all[4])->data()->at(40);
    const QPointF pixel(plots->loss_plot()->xAxis->coordToPixel(point->key),
                        plots->loss_plot()->yAxis->coordToPixel(point->value));
    const auto hit = plots->readout(RunPlots::Plot::Loss)->hover(pixel);
    QVERIFY(hit && !hit->runs.empty());
    QVERIFY2(hit->text.contains("step 40") && hit->text.contains("loss"), qPrintable(hit->text));
    QVERIFY(!plots->readout(RunPlots::Plot::Loss)->hover(QPointF(-100, -100)));
    auto* breakdown = plots->plot(RunPlots::Plot::StepTime);
    breakdown->replot(QCustomPlot::rpImmediateRefresh);
    QVERIFY(breakdown->graphCount() >= 1);
    // Its legend names the four parts beside the curves, not over their right end.
    QCOMPARE(breakdown->legend->itemCount(), 4);
    QVERIFY(breakdown->legend->visible() && breakdown->legend->outerRect().height() > 0);
    QVERIFY2(!breakdown->legend->outerRect().intersects(breakdown->axisRect()->outerRect()),
             qPrintable(QString("legend at y %1-%2, axes from %3")
                            .arg(breakdown->legend->outerRect().top()).arg(breakdown->legend->outerRect().bottom())
                            .arg(breakdown->axisRect()->outerRect().top())));
    const auto part = breakdown->graph(0)->data()->at(30);
    const auto step_time = plots->readout(RunPlots::Plot::StepTime)
                               ->hover(QPointF(breakdown->xAxis->coordToPixel(part->key),
                                               breakdown->yAxis->coordToPixel(part->value)));
    QVERIFY2(step_time && step_time->text.contains("step 30") && step_time->text.contains(" ms"),
             qPrintable(step_time ? step_time->text : ""));

    // Distinct colours: 24 per theme, every pair far apart in CIELAB.
    for (const auto theme : {ThemeChoice::Light, ThemeChoice::Dark}) {
      window.set_theme(theme);
      const auto colours = current_theme().series;
      QVERIFY(colours.size() >= 20);
      for (std::size_t i = 0; i < colours.size(); ++i)
        for (std::size_t j = i + 1; j < colours.size(); ++j) {
          const auto a = lab(colours[i]), b = lab(colours[j]);
          const double distance = std::hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);
          QVERIFY2(distance > 30, qPrintable(QString("colours %1 and %2: %3").arg(i).arg(j).arg(distance)));
        }
      std::set<QRgb> pens;
      for (int g = 0; g < 24; ++g) pens.insert(plots->loss_graph(all[g])->pen().color().rgb());
      QCOMPARE(pens.size(), std::size_t{24});
      // The step time's four parts, thin lines side by side, differ in hue (CIELAB), not only in lightness:
      // forward and hook were 40 degrees apart, blue beside blue.
      QCOMPARE(breakdown->graphCount(), 4);
      for (int i = 0; i < 4; ++i)
        for (int j = i + 1; j < 4; ++j) {
          const auto a = lab(breakdown->graph(i)->pen().color()), b = lab(breakdown->graph(j)->pen().color());
          double apart = std::abs(std::atan2(a[2], a[1]) - std::atan2(b[2], b[1])) * 180 / M_PI;
          apart = std::min(apart, 360 - apart);
          QVERIFY2(apart >= 60, qPrintable(QString("%1 and %2: %3 degrees apart in the %4 theme")
                                               .arg(breakdown->graph(i)->name(), breakdown->graph(j)->name())
                                               .arg(apart, 0, 'f', 0)
                                               .arg(theme == ThemeChoice::Dark ? "dark" : "light")));
        }
    }

    // Log axes where values span decades; smoothing as TensorBoard does it.
    auto* wire = plots->plot(RunPlots::Plot::Wire);
    QCOMPARE(wire->yAxis->scaleType(), QCPAxis::stLogarithmic);  // bytes start on a log axis
    QVERIFY(runs->findChild<QCheckBox*>("plots:log:bytes")->isChecked());
    runs->findChild<QCheckBox*>("plots:log:loss")->setChecked(true);
    QCOMPARE(plots->loss_plot()->yAxis->scaleType(), QCPAxis::stLogarithmic);
    plots->set_log_y(RunPlots::Plot::Loss, false);
    QVERIFY(!runs->findChild<QCheckBox*>("plots:log:loss")->isChecked());
    QCOMPARE(plots->loss_plot()->yAxis->scaleType(), QCPAxis::stLinear);
    const auto raw = plots->points_of(all[0]);
    plots->set_smoothing(0.9);
    const auto smoothed = plots->loss_graph(all[0])->data();
    QCOMPARE(smoothed->at(0)->value, raw[0].loss);  // debiased: the first point is itself
    const double ema = (0.9 * 0.1 * raw[0].loss + 0.1 * raw[1].loss) / (1 - 0.81);
    QVERIFY(std::abs(smoothed->at(1)->value - ema) < 1e-12);
    // The raw curve stays in view, faint, under the smoothed one; step functions are never smoothed.
    plots->refresh(true);
    auto* faint = plots->raw_loss_graph(all[0]);
    QVERIFY(faint->visible());
    QCOMPARE(faint->data()->at(1)->value, raw[1].loss);
    QVERIFY(faint->pen().color().alpha() < 100);
    QVERIFY(faint->layer()->index() < plots->loss_graph(all[0])->layer()->index());
    for (const auto& ratio_point : *plots->plot(RunPlots::Plot::Ratio)->graph(0)->data())
      QCOMPARE(ratio_point.value, raw[0].compression_ratio());
    plots->set_smoothing(0);
    QCOMPARE(plots->loss_graph(all[0])->data()->at(1)->value, raw[1].loss);
    QVERIFY(!plots->raw_loss_graph(all[0])->visible());

    // A constant series gets distinct, round tick labels (not 3999.8, 4000, 4000.2).
    plots->solo(all[0]);
    plots->refresh(true);
    auto* ratio = plots->plot(RunPlots::Plot::Ratio);  // exactly 4000x on every step
    ratio->replot();
    const auto labels = ratio->yAxis->tickVectorLabels();
    QVERIFY(labels.size() >= 2);
    QCOMPARE(QSet<QString>(labels.begin(), labels.end()).size(), labels.size());
    QVERIFY(ratio->yAxis->range().size() >= 4000 * 0.05);
    for (const auto& label : labels) {  // each a number (in the plot's locale) with at most 3 significant digits
      bool is_number = false;
      const double v = ratio->locale().toDouble(label, &is_number);
      QVERIFY2(is_number, qPrintable(label));
      QVERIFY2(std::abs(v - QString::number(v, 'g', 3).toDouble()) < 1e-9, qPrintable(labels.join(" ")));
    }

    // Analysis: parallel coordinates with brushing, importance, the heatmap's top on its scale.
    auto* analysis = window.analysis();
    window.show_page(MainWindow::kAnalysis);
    QSignalSpy analysed(analysis, &AnalysisPage::analysed);
    analysis->select_sweep(sweep);
    analysis->refresh();
    QTRY_VERIFY_WITH_TIMEOUT(analysed.count() >= 1 && analysis->data().runs.size() == 29, 60000);
    QCOMPARE(analysis->parallel()->matching_runs().size(), std::size_t{29});
    QCOMPARE(analysis->parallel_table()->rowCount(), 29);
    const int loss_axis = 2;  // after the two swept parameters
    analysis->parallel()->set_brush(loss_axis, 0.0, 0.3);  // the lowest losses: the highest ranks
    const auto kept = analysis->parallel()->matching_runs();
    QVERIFY(!kept.empty() && kept.size() < 29);
    QCOMPARE(analysis->parallel_table()->rowCount(), static_cast<int>(kept.size()));
    for (const auto id : kept) QVERIFY(reader.run(id)->config["hook"]["matrix_approximation_rank"].get<int>() >= 4);
    // Grid values label their axes (each value, not only min and max); the best lines stand out in both themes.
    auto* parallel = analysis->parallel();
    QCOMPARE(parallel->numeric_labels(0).size(), std::size_t{5});  // ranks 1, 2, 4, 8, 16
    analysis->views()->setCurrentWidget(parallel->parentWidget());
    parallel->plot()->replot(QCustomPlot::rpImmediateRefresh);
    const auto crossing = parallel->position(0, 0);
    QVERIFY(crossing);
    const auto line_read = parallel->readout()->hover(
        QPointF(parallel->plot()->xAxis->coordToPixel(0), parallel->plot()->yAxis->coordToPixel(*crossing)));
    QVERIFY2(line_read && line_read->text.startsWith("run ") && line_read->text.contains("rank"),
             qPrintable(line_read ? line_read->text : ""));
    std::size_t best_line = 0;
    for (std::size_t l = 0; l < parallel->lines().size(); ++l)
      if (parallel->lines()[l].colour_value < parallel->lines()[best_line].colour_value) best_line = l;
    window.set_theme(ThemeChoice::Dark);
    QVERIFY2(parallel->line_colour(best_line).lightnessF() > 0.55, qPrintable(parallel->line_colour(best_line).name()));
    window.set_theme(ThemeChoice::Light);
    QVERIFY2(parallel->line_colour(best_line).lightnessF() < 0.45, qPrintable(parallel->line_colour(best_line).name()));
    const auto& importance = analysis->data().importance.shares;
    QVERIFY(!importance.empty());
    QCOMPARE(importance.front().param, std::string("hook.matrix_approximation_rank"));
    QVERIFY(importance.front().share > 0.9);
    double sum = 0;  // one decomposition: the shares add up (before: one-way ANOVAs summed to 145-170%)
    for (const auto& share : importance) sum += share.share;
    QVERIFY(std::fabs(sum - 1) < 1e-9);
    // Each bar reads on hover (its share is printed on it too); the gap between two bars reads nothing.
    auto* importance_plot = analysis->plots()[3];
    importance_plot->replot(QCustomPlot::rpImmediateRefresh);
    const double mid_bar = importance_plot->yAxis->coordToPixel(importance.front().share / 2);
    const auto bar = analysis->importance_readout()->hover(QPointF(importance_plot->xAxis->coordToPixel(0), mid_bar));
    QVERIFY2(bar && bar->text.startsWith("hook.matrix_approximation_rank: ") &&
                 bar->text.contains("% of the tail loss's variance, between its"),
             qPrintable(bar ? bar->text : ""));
    QVERIFY(!analysis->importance_readout()->hover(QPointF(importance_plot->xAxis->coordToPixel(0.5), mid_bar)));
    QCPColorMap* map = nullptr;
    for (int i = 0; i < analysis->plots()[1]->plottableCount(); ++i)
      if (auto* m = qobject_cast<QCPColorMap*>(analysis->plots()[1]->plottable(i))) map = m;
    QVERIFY(map);
    auto gradient = map->gradient();
    const QColor top = gradient.color(map->dataRange().upper, map->dataRange());
    QVERIFY2(top.lightnessF() < 0.9, qPrintable(top.name()));  // not white: on the scale

    // The Pareto plot labels its front without overlap, reads any point on hover and opens it on a click.
    auto* pareto = analysis->plots()[0];
    analysis->views()->setCurrentIndex(0);
    pareto->replot(QCustomPlot::rpImmediateRefresh);
    std::vector<QRectF> rects;
    for (int i = 0; i < pareto->itemCount(); ++i)
      if (auto* text = qobject_cast<QCPItemText*>(pareto->item(i)); text && text->objectName() == "pareto:label")
        rects.emplace_back(text->topLeft->pixelPosition(), text->bottomRight->pixelPosition());
    QVERIFY(rects.size() >= 2);
    for (std::size_t i = 0; i < rects.size(); ++i)
      for (std::size_t j = i + 1; j < rects.size(); ++j)
        QVERIFY2(!rects[i].adjusted(1, 1, -1, -1).intersects(rects[j].adjusted(1, 1, -1, -1)),
                 qPrintable(QString("labels %1 and %2 overlap").arg(i).arg(j)));
    const auto dot = pareto->graph(0)->data()->at(0);
    const QPoint at(static_cast<int>(pareto->xAxis->coordToPixel(dot->key)),
                    static_cast<int>(pareto->yAxis->coordToPixel(dot->value)));
    const auto read = analysis->pareto_readout()->hover(at);
    QVERIFY(read && !read->runs.empty());
    QVERIFY2(read->text.contains("tail loss") && read->text.contains("MB/step"), qPrintable(read->text));
    QSignalSpy open_runs(analysis, &AnalysisPage::open_runs_requested);
    QTest::mouseClick(pareto, Qt::LeftButton, {}, at);
    QCOMPARE(open_runs.count(), 1);
    QCOMPARE(open_runs.at(0).at(0).value<std::vector<std::int64_t>>(), read->runs);
    QTRY_COMPARE(window.findChild<QTabWidget*>("commtune:pages")->currentIndex(), int(MainWindow::kRuns));
    window.show_page(MainWindow::kAnalysis);
    QTRY_VERIFY(!analysis->analysing());

    // The slice plot: the tail loss against one parameter, a point per trial, read on hover.
    auto* slice_param = analysis->findChild<QComboBox*>("analysis:slice_param");
    slice_param->setCurrentText("hook.matrix_approximation_rank");
    auto* slice = analysis->findChild<QCustomPlot*>("plot:slice");
    QCOMPARE(slice->graph(0)->dataCount(), 29);
    QCOMPARE(slice->xAxis->scaleType(), QCPAxis::stLinear);  // 1 .. 16: not two decades
    auto* rank_ticks = dynamic_cast<QCPAxisTickerText*>(slice->xAxis->ticker().data());
    QVERIFY(rank_ticks);  // the grid's values, not 2.5, 7.5, 12.5
    QCOMPARE(rank_ticks->ticks().values(), QList<QString>({"1", "2", "4", "8", "16"}));
    slice->replot(QCustomPlot::rpImmediateRefresh);
    const auto trial = slice->graph(0)->data()->at(0);
    const auto sliced = analysis->slice_readout()->hover(
        QPointF(slice->xAxis->coordToPixel(trial->key), slice->yAxis->coordToPixel(trial->value)));
    QVERIFY2(sliced && sliced->text.contains("hook.matrix_approximation_rank = 1"), qPrintable(sliced ? sliced->text : ""));

    // The heatmap's parameters are the user's: another tolerance analyses again and keeps them.
    auto* heat_x = analysis->findChild<QComboBox*>("analysis:heat_x");
    auto* heat_y = analysis->findChild<QComboBox*>("analysis:heat_y");
    // Swapped from the page's own choice, so that a reset to it shows.
    const auto default_x = heat_x->currentText(), default_y = heat_y->currentText();
    QVERIFY2(default_x != default_y && !default_x.isEmpty(), qPrintable(default_x + " x " + default_y));
    heat_x->setCurrentText(default_y);
    heat_y->setCurrentText(default_x);
    const int before_tolerance = analysed.count();
    analysis->tolerance()->setValue(5);
    QTRY_VERIFY_WITH_TIMEOUT(analysed.count() > before_tolerance && !analysis->analysing(), 60000);
    QCOMPARE(heat_x->currentText(), default_y);
    QCOMPARE(heat_y->currentText(), default_x);

    // A sweep recorded meanwhile (here, by another process) does not take the page from the one the user
    // chose (it did): it is offered, and shown when asked.
    const auto newer = seed_sweep(path, {1, 2}, {2, 10});
    auto* offer = analysis->findChild<QPushButton*>("analysis:newer_sweep");
    analysis->refresh();
    QTRY_VERIFY_WITH_TIMEOUT(!offer->isHidden(), 30000);
    QCOMPARE(offer->text(), QString("Show sweep %1, new").arg(newer));
    QCOMPARE(analysis->shown_sweep(), sweep);
    offer->click();
    QTRY_COMPARE_WITH_TIMEOUT(analysis->shown_sweep(), newer, 30000);
    QVERIFY(offer->isHidden());
    // The one the user picks stays picked after a visit to another page.
    auto* scope = analysis->findChild<QComboBox*>("analysis:scope");
    scope->setCurrentIndex(scope->findData(QVariant::fromValue<qlonglong>(sweep)));
    window.show_page(MainWindow::kRuns);
    window.show_page(MainWindow::kAnalysis);
    QTRY_VERIFY(!analysis->analysing());
    QCOMPARE(analysis->shown_sweep(), sweep);
    window.set_theme(ThemeChoice::System);
  }

  // The Runs page's comparison is `commtune-cli compare --json`'s, run by run,
  // from one computation in core: over a sweep of the learning rate each run
  // is compared with the allreduce run at its own rate, not with one baseline
  // for all, and checkpoint.* settings are not listed as differences.
  void the_runs_comparison_is_the_clis() {
    namespace db = commtune::db;
    QTemporaryDir dir;
    const auto path = dir.filePath("runs.db");
    std::vector<std::int64_t> ids;
    {
      db::Store s(path.toStdString());
      const std::vector<std::tuple<double, nlohmann::json, double, int>> runs{
          {0.05, {{"name", "allreduce"}}, 1.30, 0}, {0.05, {{"name", "fp16_compress"}}, 1.32, 1},
          {0.1, {{"name", "allreduce"}}, 1.10, 2},  {0.1, {{"name", "fp16_compress"}}, 1.21, 3}};
      for (const auto& [lr, hook, loss, dump] : runs) {
        db::NewRun run;
        run.config = {{"world_size", 2}, {"steps", 20}, {"hook", hook}, {"optimizer", {{"lr", lr}}},
                      {"checkpoint", {{"every", dump}}}};
        ids.push_back(store_flat_run(s, run, 20, loss));
      }
    }
    MainWindow window(path);
    auto* runs = show_runs_page(window);
    QTRY_VERIFY(!runs->loading());
    runs->open_runs(ids);
    QTRY_VERIFY(!runs->loading());
    QTRY_COMPARE(runs->metrics()->rowCount(), 4);

    QStringList args{"--db", path, "compare", "--json"};
    for (const auto id : ids) args << QString::number(id);
    const auto compared = cli_json(args);
    QVERIFY(compared.is_object());
    QCOMPARE(compared["runs"].size(), std::size_t{4});
    const int column = column_of(runs->metrics(), "vs base");
    QVERIFY(column >= 0);
    for (int row = 0; row < 4; ++row) {
      const auto& cli_row = compared["runs"][static_cast<std::size_t>(row)];
      const auto change = cli_row["loss_change"];
      const auto shown = runs->metrics()->item(row, column)->text();
      QVERIFY2(!change.is_null(), qPrintable(QString::fromStdString(cli_row.dump())));
      const auto want = QString("%1%2%").arg(change.get<double>() >= 0 ? "+" : "").arg(100 * change.get<double>(), 0, 'f', 2);
      QCOMPARE(shown, want);
      QCOMPARE(runs->metrics()->item(row, 0)->text().endsWith("*"), cli_row["baseline"].get<bool>());
    }
    // fp16 at 0.1 is 10% above allreduce at 0.1 (not 7% below allreduce at 0.05).
    QCOMPARE(runs->metrics()->item(3, column)->text(), QString("+10.00%"));
    // The differing parameters are the CLI's: bookkeeping (debug.*) is not a difference.
    std::set<std::string> page_differing;
    runs->findChild<QCheckBox*>("runs:only_differences")->setChecked(true);
    QTRY_VERIFY(!runs->loading());
    for (int row = 0; row < runs->diff()->rowCount(); ++row)
      page_differing.insert(runs->diff()->item(row, 0)->text().toStdString());
    const auto cli_differing = compared["params"].get<std::vector<std::string>>();
    QCOMPARE(page_differing, std::set<std::string>(cli_differing.begin(), cli_differing.end()));
    QVERIFY(!page_differing.count("checkpoint.every"));
  }

  void the_runs_filter_is_the_clis_query_language() {
    QTemporaryDir dir;
    const auto path = dir.filePath("runs.db");
    const auto ids = seed_mixed_runs(path);
    MainWindow window(path);
    auto* runs = show_runs_page(window);
    QTRY_VERIFY(!runs->loading());
    QCOMPARE(runs->visible_runs(), 5);
    QStringList headers;
    for (int c = 0; c < runs->table()->model()->columnCount(); ++c)
      headers << runs->table()->model()->headerData(c, Qt::Horizontal).toString();
    QVERIFY2(headers.contains("hook.name") && headers.contains("compressor"), qPrintable(headers.join(", ")));
    QCOMPARE(headers.count("name"), 1);  // hook.name's column is not a second "name"
    // The same query finds the same runs in the table and in `list --search`.
    const auto id = [&](std::size_t i) { return QString::number(ids[i]); };
    const std::vector<std::pair<QString, QString>> expected{
        {"randomk", id(2)},  // not onebit and topk, whose configurations name a randomk setting
        {"tail_loss < 1.15", id(1) + "," + id(3) + "," + id(4)},
        {"hook.byteps_compressor_type = topk", id(1)},
        {"hook.byteps_compressor_randomk_rescale = true", id(2)},
        {"optimizer.lr = 0.3, hook.matrix_approximation_rank = 2", id(4)},
        {"hook.matrix_approximation_rank != 2, byteps", id(0) + "," + id(1) + "," + id(2)}};
    for (const auto& [query, want] : expected) {
      runs->search()->setText(query);
      QVERIFY2(runs->filter_problem().isEmpty(), qPrintable(runs->filter_problem()));
      QCOMPARE(visible_ids(runs), want);
      QCOMPARE(cli_search(path, query), want);
    }
    // A parameter nobody has is said to be unknown, here and in the CLI, not an empty table.
    runs->search()->setText("hook.matrix_aproximation_rank = 2");
    QVERIFY2(runs->filter_problem().contains("'hook.matrix_aproximation_rank'"), qPrintable(runs->filter_problem()));
    const auto refused = cli_search(path, "hook.matrix_aproximation_rank = 2");
    QVERIFY2(refused.startsWith("exit 2") && refused.contains("'hook.matrix_aproximation_rank'"), qPrintable(refused));
    // A mistyped name is answered with the name meant, the CLI's words, and shows no run (every run shown
    // would read as if the filter held for all).
    runs->search()->setText("los < 1");
    QVERIFY2(runs->filter_problem().contains("'los'") && runs->filter_problem().contains("did you mean 'tail_loss'"),
             qPrintable(runs->filter_problem()));
    QCOMPARE(runs->visible_runs(), 0);
    const auto mistyped = cli_search(path, "los < 1");
    QVERIFY2(mistyped.startsWith("exit 2") && mistyped.contains(runs->filter_problem()), qPrintable(mistyped));
    runs->search()->clear();
    QCOMPARE(runs->visible_runs(), 5);

    // Analysed: the one hook with a compressor is one heatmap column, centred on its tick.
    auto* analysis = window.analysis();
    QSignalSpy analysed(analysis, &AnalysisPage::analysed);
    window.show_page(MainWindow::kAnalysis);
    QTRY_VERIFY_WITH_TIMEOUT(analysed.count() >= 1 && analysis->data().runs.size() == 5, 60000);
    auto* map = analysis->plots()[1]->findChild<QCPColorMap*>("heatmap:cells");
    QVERIFY(map);
    bool found = false;
    const auto key_range = map->getKeyRange(found);
    const auto value_range = map->getValueRange(found);
    const bool x_is_hook = analysis->findChild<QComboBox*>("analysis:heat_x")->currentText() == "hook.name";
    const auto single = x_is_hook ? key_range : value_range;
    QVERIFY2(std::abs(single.center()) < 1e-9 && std::abs(single.size() - 1) < 1e-9,
             qPrintable(QString("%1 .. %2").arg(single.lower).arg(single.upper)));
    // Parallel coordinates: allreduce, which has no compressor, goes past that axis instead of breaking its line.
    auto* parallel_plot = analysis->parallel()->plot();
    QCPCurve* allreduce_line = nullptr;
    for (int i = 0; i < parallel_plot->plottableCount(); ++i)
      if (parallel_plot->plottable(i)->name() == QString::number(ids[3]))
        allreduce_line = qobject_cast<QCPCurve*>(parallel_plot->plottable(i));
    QVERIFY(allreduce_line);
    QVERIFY(allreduce_line->data()->size() >= 2);
    for (const auto& point : *allreduce_line->data()) QVERIFY(std::isfinite(point.value));
    // Tick labels of swept numbers read short, and a sweep over hooks puts the learning rate on the heatmap.
    QCOMPARE(short_value_labels({"0.04472135955", "0.1", "0.316227766017"}),
             (std::vector<QString>{"0.0447", "0.1", "0.316"}));
    QCOMPARE(short_value_labels({"1.0001", "1.0002", "topk"}), (std::vector<QString>{"1.0001", "1.0002", "topk"}));

    // Compared, allreduce and PowerSGD differ in PowerSGD's own parameters too.
    window.show_page(MainWindow::kRuns);
    runs->open_runs({ids[3], ids[4]});
    QTRY_VERIFY(!runs->loading());
    QTRY_VERIFY(runs->diff()->rowCount() >= 1);
    QStringList differing;
    for (int row = 0; row < runs->diff()->rowCount(); ++row)
      if (runs->diff()->item(row, 1)->font().bold()) differing << runs->diff()->item(row, 0)->text();
    for (const char* name : {"hook.name", "hook.matrix_approximation_rank", "hook.start_powerSGD_iter"})
      QVERIFY2(differing.contains(name), qPrintable(differing.join(", ")));
  }

  void the_heatmap_offers_only_what_it_can_draw() {
    // The colour bar's label takes the theme's foreground (not black on the dark theme's grey); "All stored
    // runs" (no swept parameters) keeps none of the previous sweep's ticks, and its axis choices are off.
    QTemporaryDir dir;
    const auto path = dir.filePath("runs.db");
    const auto sweep = seed_sweep(path, {1, 4}, {2, 10});
    MainWindow window(path);
    window.set_theme(ThemeChoice::Dark);
    auto* analysis = analyse_sweep(window, sweep);
    QTRY_VERIFY_WITH_TIMEOUT(analysis->data().runs.size() == 4 && !analysis->analysing(), 60000);
    auto* heatmap = analysis->plots()[1];
    QCPColorScale* scale = nullptr;
    for (int i = 0; i < heatmap->plotLayout()->elementCount(); ++i)
      if (auto* s = qobject_cast<QCPColorScale*>(heatmap->plotLayout()->elementAt(i))) scale = s;
    QVERIFY(scale);
    QCOMPARE(scale->axis()->labelColor(), commtune::ui::current_theme().foreground);
    auto* heat_x = analysis->findChild<QComboBox*>("analysis:heat_x");
    QVERIFY(heat_x->isEnabled());
    QVERIFY(heatmap->xAxis->tickLabels());

    QSignalSpy analysed(analysis, &AnalysisPage::analysed);
    analysis->select_sweep(0);  // every stored run: no swept parameters
    QTRY_VERIFY_WITH_TIMEOUT(analysed.count() >= 1 && analysis->shown_sweep() == 0 && !analysis->analysing(), 60000);
    QVERIFY(analysis->data().axes.empty());
    QVERIFY(!heat_x->isEnabled());
    QVERIFY(!analysis->findChild<QComboBox*>("analysis:heat_y")->isEnabled());
    QVERIFY(!heatmap->xAxis->tickLabels() && !heatmap->yAxis->tickLabels());
    window.set_theme(ThemeChoice::Light);
  }

  void the_window_fits_a_laptop_screen() {
    // The window's minimum fits a 1366x700 screen on every page and the Sweep form, and the window does not
    // grow back past it when curves open, the theme changes or a sweep is analysed.
    QTemporaryDir dir;
    const auto path = dir.filePath("runs.db");
    const auto sweep = seed_sweep(path, {1, 4}, {2, 10});
    MainWindow window(path);
    window.resize(1366, 700);
    window.show();
    // What does not fit, after `when` (empty: it fits).
    const auto misfit = [&](const QString& when) {
      QApplication::processEvents();
      const auto least = window.minimumSizeHint().expandedTo(window.minimumSize());
      if (least.width() > 1366 || least.height() > 700)
        return QString("%1: at least %2x%3").arg(when).arg(least.width()).arg(least.height());
      return window.height() > 700 ? QString("%1: %2 px high").arg(when).arg(window.height()) : QString();
    };
    for (const auto page : {MainWindow::kLaunch, MainWindow::kDashboard, MainWindow::kRuns, MainWindow::kAnalysis}) {
      window.show_page(page);
      QVERIFY2(misfit("page").isEmpty(), qPrintable(misfit(QString("page %1").arg(int(page)))));
    }
    window.show_page(MainWindow::kLaunch);
    window.launch()->show_sweep(true);
    QVERIFY2(misfit("").isEmpty(), qPrintable(misfit("the Sweep form")));
    window.show_page(MainWindow::kRuns);
    window.runs()->open_runs({1, 2, 3});
    QTRY_VERIFY_WITH_TIMEOUT(!window.runs()->loading(), 30000);
    QVERIFY2(misfit("").isEmpty(), qPrintable(misfit("curves opened")));
    window.set_theme(ThemeChoice::Dark);
    QVERIFY2(misfit("").isEmpty(), qPrintable(misfit("the dark theme")));
    window.set_theme(ThemeChoice::Light);
    analyse_sweep(window, sweep);
    QVERIFY2(misfit("").isEmpty(), qPrintable(misfit("a sweep analysed")));
  }

  // At 1000 px the what-if table shows every network's row without the
  // splitter being dragged, and each verdict whole, wrapped in its cell.
  void the_what_if_table_shows_every_network_whole() {
    QTemporaryDir dir;
    const auto path = dir.filePath("runs.db");
    seed_mixed_runs(path);  // an allreduce run among them: a verdict per network
    MainWindow window(path);
    window.resize(1600, 1000);
    auto* analysis = analyse_sweep(window, 1);
    QTRY_VERIFY_WITH_TIMEOUT(analysis->data().runs.size() == 5 && !analysis->analysing(), 60000);
    QApplication::processEvents();
    auto* table = analysis->what_if_table();
    QCOMPARE(table->rowCount(), static_cast<int>(commtune::net::link_presets().size()));
    QCOMPARE(window.height(), 1000);  // the window does not grow to hold the table (to 1384 px at 1080p)
    const int verdict = column_of(table, "verdict");
    QVERIFY(verdict >= 0);
    const auto viewport = table->viewport()->rect();
    for (int r = 0; r < table->rowCount(); ++r) {
      const auto cell = table->visualRect(table->model()->index(r, verdict));
      QVERIFY2(viewport.contains(cell), qPrintable(QString("row %1's verdict at (%2, %3)-(%4, %5) in a %6x%7 viewport")
                                                       .arg(r).arg(cell.left()).arg(cell.top()).arg(cell.right())
                                                       .arg(cell.bottom()).arg(viewport.width()).arg(viewport.height())));
      // The whole verdict fits its cell, wrapped at the column's width.
      const auto text = table->item(r, verdict)->text();
      const int needed = table->fontMetrics()
                             .boundingRect(QRect(0, 0, cell.width() - 8, 100000), Qt::TextWordWrap, text)
                             .height();
      QVERIFY2(needed <= cell.height(), qPrintable(QString("row %1's verdict needs %2 px, has %3: %4")
                                                        .arg(r).arg(needed).arg(cell.height()).arg(text)));
      QVERIFY(table->item(r, verdict)->toolTip().startsWith(text));
    }
    // The wrapped rows still leave the window a laptop's height.
    window.resize(1366, 700);
    QApplication::processEvents();
    const auto least = window.minimumSizeHint().expandedTo(window.minimumSize());
    QVERIFY2(least.height() <= 700 && window.height() <= 700,
             qPrintable(QString("at least %1 px high, %2 px now").arg(least.height()).arg(window.height())));
  }

  // The parallel coordinates' value labels sit beside the points, not on
  // them (from the axis rightwards, under the lines leaving it), drawn over
  // the lines, and a colour legend says what the colours mean.
  void parallel_coordinates_label_beside_the_points_with_a_colour_legend() {
    for (const auto choice : {ThemeChoice::Light, ThemeChoice::Dark}) {
      commtune::ui::apply_theme(*qApp, choice);
      ParallelCoordinates parallel;
      parallel.resize(900, 500);
      parallel.show();
      std::vector<ParallelCoordinates::Line> lines;
      for (int i = 0; i < 6; ++i)
        lines.push_back({i + 1, {QString::number(1 << (i % 3)), i % 2 ? "topk" : "onebit", QString::number(1.0 + 0.1 * i)},
                         1.0 + 0.1 * i});
      parallel.set_data({"rank", "compressor", "tail loss"}, lines);
      auto* plot = parallel.plot();
      plot->replot(QCustomPlot::rpImmediateRefresh);
      int labels = 0;
      for (int i = 0; i < plot->itemCount(); ++i) {
        auto* text = qobject_cast<QCPItemText*>(plot->item(i));
        if (!text) continue;
        ++labels;
        const QRectF rect(text->topLeft->pixelPosition(), text->bottomRight->pixelPosition());
        const double axis_px = plot->xAxis->coordToPixel(std::round(plot->xAxis->pixelToCoord(rect.center().x())));
        QVERIFY2(rect.right() < axis_px - 3 || rect.left() > axis_px + 3,
                 qPrintable(QString("'%1' spans %2..%3 px over its axis at %4 px")
                                .arg(text->text()).arg(rect.left()).arg(rect.right()).arg(axis_px)));
        QVERIFY2(text->layer()->index() > plot->plottable(0)->layer()->index(),
                 qPrintable(text->text() + " is drawn under the lines"));
      }
      QVERIFY(labels >= 8);
      if (choice == ThemeChoice::Dark) plot->savePng(QDir::temp().filePath("commtune-parallel-dark.png"));
      QCPColorScale* scale = nullptr;
      for (int i = 0; i < plot->plotLayout()->elementCount(); ++i)
        if (auto* s = qobject_cast<QCPColorScale*>(plot->plotLayout()->elementAt(i))) scale = s;
      QVERIFY2(scale, "no colour legend");
      QCOMPARE(scale->axis()->label(), QString("tail loss"));
      QVERIFY(std::abs(scale->dataRange().lower - 1.0) < 1e-9 && std::abs(scale->dataRange().upper - 1.5) < 1e-9);
      QCOMPARE(scale->axis()->labelColor(), commtune::ui::current_theme().foreground);
      // The legend's colour at the best loss is the best line's.
      auto gradient = scale->gradient();
      QCOMPARE(QColor(gradient.color(1.0, scale->dataRange())), parallel.line_colour(0));
      QCOMPARE(QColor(gradient.color(1.5, scale->dataRange())), parallel.line_colour(5));
    }
    commtune::ui::apply_theme(*qApp, ThemeChoice::Light);
  }

  // The Sweep form shows the TPE and SLURM fields only for that strategy or backend.
  void the_sweep_form_shows_tpe_and_slurm_fields_only_when_chosen() {
    MainWindow window(store());
    window.resize(1366, 768);
    window.show();
    window.show_page(MainWindow::kLaunch);
    window.launch()->show_sweep(true);
    auto* sweep = window.launch()->sweep();
    const auto shown = [&](const QString& path) {
      auto* field = sweep->findChild<ParamField*>("field:sweep." + path);
      return field && field->isVisibleTo(sweep);
    };
    QVERIFY(shown("strategy") && shown("backend") && shown("trials"));
    QVERIFY(!shown("tpe_startup_trials") && !shown("tpe_candidates"));
    QVERIFY(!shown("slurm.partition"));
    sweep->set_option("strategy", "tpe");
    QVERIFY(shown("tpe_startup_trials") && shown("tpe_candidates"));
    // As a user picks it: the strategy's own box.
    sweep->findChild<ParamField*>("field:sweep.strategy")->findChild<QComboBox*>()->setCurrentText("random");
    QVERIFY(!shown("tpe_candidates"));
    sweep->findChild<ParamField*>("field:sweep.backend")->findChild<QComboBox*>()->setCurrentText("slurm");
    QVERIFY(shown("slurm.partition"));
    // A spec from a file shows what it chose.
    auto spec = sweep->spec();
    spec["strategy"] = "tpe";
    spec["trials"] = 8;
    spec["backend"] = "local";
    sweep->set_spec(spec);
    QVERIFY(shown("tpe_candidates") && !shown("slurm.partition"));
  }

  // A best-so-far plot, the tail loss's empirical distribution, the sign of each parameter's
  // effect beside its importance and the baseline on the slices, each drawn from core/tuner/verdict/sweep_figures.h.
  void the_sweeps_history_distribution_signs_and_baselines_are_drawn_from_core() {
    QTemporaryDir dir;
    const auto path = dir.filePath("runs.db");
    seed_mixed_runs(path);  // four trials and an allreduce baseline at 1.0
    MainWindow window(path);
    window.resize(1600, 1000);
    auto* analysis = analyse_sweep(window, 1);
    QTRY_VERIFY_WITH_TIMEOUT(analysis->data().runs.size() == 5 && !analysis->analysing(), 60000);
    const auto history = commtune::optimization_history(analysis->data());
    QCOMPARE(history.trials.size(), std::size_t{4});
    auto* history_plot = analysis->findChild<QCustomPlot*>("plot:history");
    QVERIFY(history_plot);
    auto* best = history_plot->graph(1);
    QCOMPARE(best->name(), QString("best so far"));
    QCOMPARE(best->dataCount(), 4);
    for (int i = 0; i < 4; ++i) {
      // Each at its trial's number in the sweep: the baseline was trial 4.
      QCOMPARE(best->data()->at(i)->key, double(std::array{1, 2, 3, 5}[static_cast<std::size_t>(i)]));
      QCOMPARE(best->data()->at(i)->value, *history.trials[static_cast<std::size_t>(i)].best);
    }
    const auto baseline_line_at = [](QCustomPlot* plot, bool vertical) -> std::optional<double> {
      for (int i = 0; i < plot->itemCount(); ++i)
        if (auto* line = qobject_cast<QCPItemStraightLine*>(plot->item(i)))
          return vertical ? line->point1->coords().x() : line->point1->coords().y();
      return std::nullopt;
    };
    QCOMPARE(baseline_line_at(history_plot, false).value_or(-1), 1.0);
    // Trial numbers are whole: a tick every whole number of trials, none between two.
    const auto whole = history_plot->xAxis->ticker().dynamicCast<QCPAxisTickerFixed>();
    QVERIFY(whole && whole->tickStep() == 1 && whole->scaleStrategy() == QCPAxisTickerFixed::ssMultiples);
    analysis->views()->setCurrentIndex(analysis->views()->count() - 1);
    history_plot->replot(QCustomPlot::rpImmediateRefresh);
    const auto first = history_plot->graph(0)->data()->at(0);
    const auto read = analysis->history_readout()->hover(
        {history_plot->xAxis->coordToPixel(first->key), history_plot->yAxis->coordToPixel(first->value)});
    QVERIFY2(read && read->text.startsWith("trial 1 (run ") && read->runs.size() == 1, qPrintable(read ? read->text : "nothing"));
    // The distribution: a step at each trial's loss, the share of the four at or below it.
    const auto edf = commtune::empirical_distribution(analysis->data());
    auto* distribution = analysis->findChild<QCustomPlot*>("plot:distribution");
    QVERIFY(distribution);
    QCOMPARE(distribution->graph(0)->dataCount(), static_cast<int>(edf.losses.size()));
    for (std::size_t i = 0; i < edf.losses.size(); ++i) {
      QCOMPARE(distribution->graph(0)->data()->at(static_cast<int>(i))->key, edf.losses[i]);
      QCOMPARE(distribution->graph(0)->data()->at(static_cast<int>(i))->value, edf.fractions[i]);
    }
    QCOMPARE(edf.fractions.back(), 1.0);
    QCOMPARE(baseline_line_at(distribution, true).value_or(-1), 1.0);
    distribution->replot(QCustomPlot::rpImmediateRefresh);
    const auto step = distribution->graph(0)->data()->at(1);
    const auto share = analysis->distribution_readout()->hover(
        {distribution->xAxis->coordToPixel(step->key), distribution->yAxis->coordToPixel(step->value)});
    QVERIFY2(share && share->text.contains("2 of 4 trials"), qPrintable(share ? share->text : "nothing"));
    // The slice over the compressor, which allreduce does not have: the baseline as one level.
    analysis->findChild<QComboBox*>("analysis:slice_param")->setCurrentText("hook.byteps_compressor_type");
    QCOMPARE(baseline_line_at(analysis->plots()[4], false).value_or(-1), 1.0);

    // A sweep over PowerSGD's rank, whose loss falls as the rank rises: the importance bar says so.
    QTemporaryDir other_dir;
    const auto other_path = other_dir.filePath("runs.db");
    const auto sweep = seed_sweep(other_path, {1, 4, 8}, {2, 10});
    MainWindow other(other_path);
    auto* other_analysis = analyse_sweep(other, sweep);
    QTRY_VERIFY_WITH_TIMEOUT(other_analysis->data().runs.size() == 6 && !other_analysis->analysing(), 60000);
    auto ticker = other_analysis->plots()[3]->xAxis->ticker().dynamicCast<QCPAxisTickerText>();
    QVERIFY(ticker);
    QStringList ticks;
    for (const auto& label : ticker->ticks()) ticks << label;
    QVERIFY2(ticks.contains("hook.matrix_approximation_rank (−)"), qPrintable(ticks.join(" | ")));
  }

  // A scatter-plot matrix of the swept parameters against the tail loss and the step time.
  void the_scatter_matrix_shows_each_parameter_against_loss_and_step_time() {
    QTemporaryDir dir;
    const auto path = dir.filePath("runs.db");
    const auto sweep = seed_sweep(path, {1, 4, 8}, {2, 10});
    MainWindow window(path);
    window.resize(1600, 1000);
    auto* analysis = analyse_sweep(window, sweep);
    QTRY_VERIFY_WITH_TIMEOUT(analysis->data().runs.size() == 6 && !analysis->analysing(), 60000);
    const auto matrix = commtune::scatter_matrix(analysis->data());
    QCOMPARE(matrix.columns.size(), std::size_t{2});
    auto* scatter = analysis->findChild<QCustomPlot*>("plot:scatter_matrix");
    QVERIFY(scatter);
    QCOMPARE(scatter->axisRectCount(), 4);  // 2 parameters x (tail loss, ms/step)
    QCOMPARE(scatter->graphCount(), 4);
    // The rank's column, the tail loss's row: a point per trial at its rank and loss (1 + 1/rank, and the tail).
    QCOMPARE(QString::fromStdString(matrix.columns[0].param), QString("hook.matrix_approximation_rank"));
    auto* rank_loss = scatter->graph(0);  // the first row's first panel
    QCOMPARE(rank_loss->valueAxis()->label(), QString("tail loss"));
    QCOMPARE(rank_loss->dataCount(), 6);
    std::set<double> ranks;
    for (const auto& d : *rank_loss->data()) {
      ranks.insert(d.key);
      QVERIFY2(std::abs(d.value - (1.0 + 1.0 / d.key)) < 0.05, qPrintable(QString("%1 at rank %2").arg(d.value).arg(d.key)));
    }
    QCOMPARE(ranks, (std::set<double>{1, 4, 8}));
    // A grid's numbers label themselves: ticks at ranks 1, 4 and 8 (there were 2.5 and 7.5 between).
    const auto rank_ticks = rank_loss->keyAxis()->ticker().dynamicCast<QCPAxisTickerText>();
    QVERIFY(rank_ticks);
    QCOMPARE(rank_ticks->ticks().keys(), (QList<double>{1, 4, 8}));
    QVERIFY(scatter->graph(2)->dataCount() == 6);  // ms/step measured for every trial
    analysis->views()->setCurrentIndex(analysis->views()->count() - 1);
    scatter->replot(QCustomPlot::rpImmediateRefresh);
    const auto point = rank_loss->data()->at(5);
    const auto read = analysis->scatter_readout()->hover(
        {rank_loss->keyAxis()->coordToPixel(point->key), rank_loss->valueAxis()->coordToPixel(point->value)});
    QVERIFY2(read && read->text.contains("hook.matrix_approximation_rank = 8") && read->text.contains("tail loss") &&
                 read->runs.size() == 1,
             qPrintable(read ? read->text : "nothing"));
  }

  void the_compressed_level_stays_off_the_bytes_axis() {
    // A log axis fitted exactly would put a PowerSGD run's compressed level (0.156 MB a step after ten
    // steps of 4 MB) on the axis line, and the exported plot would show the line dropping to nothing.
    RunPlots plots;
    plots.resize(900, 700);
    plots.show();
    plots.add_run(1, "1 powersgd");
    feed_run(plots, 1, [](int) { return 1.0; }, [](int step) { return step < 10 ? 4e6 : 1.56e5; });
    plots.refresh(true);
    auto* wire = plots.plot(RunPlots::Plot::Wire);
    QCOMPARE(wire->yAxis->scaleType(), QCPAxis::stLogarithmic);
    wire->replot(QCustomPlot::rpImmediateRefresh);
    double lowest = INFINITY, highest = 0;
    for (int g = 0; g < wire->graphCount(); ++g)
      for (const auto& d : *wire->graph(g)->data())
        if (d.value > 0) lowest = std::min(lowest, d.value), highest = std::max(highest, d.value);
    QVERIFY(std::isfinite(lowest) && highest > lowest);
    const auto rect = wire->axisRect()->rect();
    QVERIFY2(wire->yAxis->coordToPixel(lowest) < rect.bottom() - 3,
             qPrintable(QString("lowest level at %1 px, axis at %2").arg(wire->yAxis->coordToPixel(lowest)).arg(rect.bottom())));
    QVERIFY(wire->yAxis->coordToPixel(highest) > rect.top() + 3);
  }

  // "Stop all" for a sweep started elsewhere reaches it, not only this window's own jobs, and is on while only
  // a terminal's sweep runs: the sweep stops as Ctrl-C in its terminal stops it, cancelled.
  void stop_all_ends_a_sweep_started_in_a_terminal() {
    QTemporaryDir dir;
    const auto path = dir.filePath("runs.db");
    MainWindow window(path);
    window.show();
    window.show_page(MainWindow::kDashboard);
    const auto cli = QFileInfo(qEnvironmentVariable("COMMTUNE_WORKER")).dir().filePath("commtune-cli");
    QProcess other;
    // The allreduce baseline, then fp16 and bf16: three trials of many steps.
    other.start(cli, {"--db", path, "sweep", "--axis", "hook.name=fp16_compress,bf16_compress", "--set", "steps=200000",
                      "--set", "world_size=2", "--set", "model.hidden=64", "--set", "data.features=32"});
    QVERIFY(other.waitForStarted());
    auto* dashboard = window.dashboard();
    auto* trials = dashboard->findChild<QTableWidget*>("dashboard:trials");
    QTRY_VERIFY_WITH_TIMEOUT(trials->rowCount() == 1, 60000);
    const auto run_id = trials->item(0, 0)->text().toLongLong();
    QTRY_VERIFY_WITH_TIMEOUT(dashboard->plots()->points(run_id) >= 3, 60000);
    auto* stop_all = dashboard->findChild<QPushButton*>("dashboard:stop_all");
    QVERIFY(stop_all->isEnabled());
    stop_all->click();
    QVERIFY(other.waitForFinished(60000));
    QCOMPARE(other.exitCode(), 130);  // cancelled, as by Ctrl-C
    QTRY_COMPARE_WITH_TIMEOUT(dashboard->status_of(run_id), QString("cancelled"), 30000);
    commtune::db::Store reader(path.toStdString(), commtune::db::Store::Access::ReadOnly);
    const auto sweeps = reader.sweeps();
    QCOMPARE(sweeps.size(), std::size_t{1});
    QCOMPARE(QString::fromStdString(sweeps[0].status), QString("cancelled"));
    QCOMPARE(trials->rowCount(), 1);  // no next trial started
    QTRY_VERIFY(!stop_all->isEnabled());
  }

  // Any finished sweep put back on the Dashboard, from the Analysis page.
  void a_finished_sweep_goes_back_on_the_dashboard() {
    QTemporaryDir dir;
    const auto path = dir.filePath("runs.db");
    const auto sweep = seed_sweep(path, {1, 4}, {2, 10});
    MainWindow window(path);
    auto* analysis = analyse_sweep(window, sweep);
    QTRY_VERIFY_WITH_TIMEOUT(analysis->data().runs.size() == 4 && !analysis->analysing(), 60000);
    auto* button = analysis->findChild<QPushButton*>("analysis:to_dashboard");
    QVERIFY(button && button->isEnabled());
    button->click();
    QTRY_COMPARE(window.findChild<QTabWidget*>("commtune:pages")->currentIndex(), int(MainWindow::kDashboard));
    auto* dashboard = window.dashboard();
    auto* trials = dashboard->findChild<QTableWidget*>("dashboard:trials");
    QTRY_COMPARE_WITH_TIMEOUT(trials->rowCount(), 4, 30000);
    for (int row = 0; row < 4; ++row) {
      const auto id = trials->item(row, 0)->text().toLongLong();
      QCOMPARE(dashboard->status_of(id), QString("succeeded"));
      QCOMPARE(dashboard->plots()->points(id), std::size_t{100});
    }
    QVERIFY2(dashboard->sweep_text().contains(QString("Sweep %1").arg(sweep)) &&
                 dashboard->sweep_text().contains("4 of 4 trials ended"),
             qPrintable(dashboard->sweep_text()));
    QVERIFY(!dashboard->findChild<QPushButton*>("dashboard:stop_all")->isEnabled());
    // "All stored runs" is no sweep to put back.
    analysis->select_sweep(0);
    QTRY_VERIFY(!button->isEnabled());
  }

  void a_sweep_from_the_terminal_shows_on_the_dashboard_by_itself() {
    QTemporaryDir dir;
    const auto path = dir.filePath("runs.db");
    MainWindow window(path);
    window.show();
    window.show_page(MainWindow::kLaunch);
    const auto cli = QFileInfo(qEnvironmentVariable("COMMTUNE_WORKER")).dir().filePath("commtune-cli");
    QProcess other;
    // An fp16 trial and, first, its allreduce baseline: 2 trials.
    other.start(cli, {"--db", path, "sweep", "--axis", "hook.name=fp16_compress", "--set", "steps=200000", "--set",
                      "world_size=2", "--set", "model.hidden=64", "--set", "data.features=32"});
    QVERIFY(other.waitForStarted());
    // Nobody asks for it: the dashboard finds the sweep's running trial and shows its points as they are stored.
    auto* dashboard = window.dashboard();
    auto* trials = dashboard->findChild<QTableWidget*>("dashboard:trials");
    QTRY_VERIFY_WITH_TIMEOUT(trials->rowCount() == 1, 60000);
    const auto run_id = trials->item(0, 0)->text().toLongLong();
    QTRY_VERIFY_WITH_TIMEOUT(dashboard->plots()->points(run_id) >= 5, 60000);
    QCOMPARE(dashboard->status_of(run_id), QString("running"));
    auto* label = dashboard->findChild<QLabel*>("dashboard:label");
    // The baseline counts: not "of 1" (the axes' count), nor "2 of 1 trials ended".
    QVERIFY2(label->text().contains("of 2 trials") && label->text().contains("another process"),
             qPrintable(label->text()));
    QVERIFY(other.state() == QProcess::Running);

    // A run of this window's own starts beside it: the terminal's trial stays, not replaced.
    const auto own = run_own_job(window);
    QVERIFY(dashboard->row_of(own) >= 0);
    QVERIFY(dashboard->row_of(run_id) >= 0 && dashboard->plots()->has_run(run_id));
    QCOMPARE(dashboard->status_of(run_id), QString("running"));

    // A click on its curve opens it on the Runs page.
    auto* plots = dashboard->plots();
    window.show_page(MainWindow::kDashboard);
    plots->refresh(true);
    plots->loss_plot()->replot(QCustomPlot::rpImmediateRefresh);
    // On the point of its curve farthest from every other curve: the window's own run trains the same model,
    // and its curve can pass through the same pixels (a click there opened that run instead).
    auto* loss_plot = plots->loss_plot();
    const auto pixel_of = [&](const QCPGraphData& d) {
      return QPointF(loss_plot->xAxis->coordToPixel(d.key), loss_plot->yAxis->coordToPixel(d.value));
    };
    QPointF target;
    double clearest = -1;
    for (const auto& d : *plots->loss_graph(run_id)->data()) {
      const auto at = pixel_of(d);
      double nearest = INFINITY;
      for (int g = 0; g < loss_plot->graphCount(); ++g)
        if (loss_plot->graph(g) != plots->loss_graph(run_id) && loss_plot->graph(g)->visible())
          for (const auto& point : *loss_plot->graph(g)->data())
            nearest = std::min(nearest, QLineF(at, pixel_of(point)).length());
      if (loss_plot->axisRect()->rect().contains(at.toPoint()) && nearest > clearest) clearest = nearest, target = at;
    }
    QVERIFY2(clearest > 10, qPrintable(QString("the curves overlap: %1 px apart at best").arg(clearest)));
    QTest::mouseClick(loss_plot, Qt::LeftButton, {}, target.toPoint());
    QTRY_COMPARE(window.findChild<QTabWidget*>("commtune:pages")->currentIndex(), int(MainWindow::kRuns));
    QTRY_COMPARE(window.runs()->selected_runs(), (std::vector<std::int64_t>{run_id}));
    window.show_page(MainWindow::kDashboard);

    // Its Stop asks the terminal's process to stop this trial: the sweep goes on with the next, shown too.
    auto* stop = dashboard->findChild<QPushButton*>(QString("dashboard:stop:%1").arg(run_id));
    QVERIFY(stop && stop->isEnabled());
    stop->click();
    QTRY_COMPARE_WITH_TIMEOUT(dashboard->status_of(run_id), QString("stopped"), 30000);
    QTRY_VERIFY_WITH_TIMEOUT(trials->rowCount() == 3, 60000);
    const auto second = trials->item(2, 0)->text().toLongLong();
    QTRY_VERIFY_WITH_TIMEOUT(dashboard->plots()->points(second) >= 5, 60000);
    QVERIFY(other.state() == QProcess::Running);
    dashboard->findChild<QPushButton*>(QString("dashboard:stop:%1").arg(second))->click();
    QVERIFY(other.waitForFinished(60000));
    QTRY_COMPARE_WITH_TIMEOUT(dashboard->status_of(second), QString("stopped"), 30000);
    commtune::db::Store reader(path.toStdString(), commtune::db::Store::Access::ReadOnly);
    for (const auto id : {run_id, second})
      QCOMPARE(QString::fromStdString(reader.run(id)->status), QString("stopped"));
    QVERIFY(!QFileInfo::exists(path + ".stop/" + QString::number(run_id)));  // each request was taken

    // Once all of that has ended, a new job has the dashboard and its axes to itself (not the last job's).
    const auto next = run_own_job(window);
    QCOMPARE(trials->rowCount(), 1);
    QVERIFY(dashboard->row_of(next) == 0 && !plots->has_run(run_id) && !plots->has_run(second));
    plots->refresh(true);
    QVERIFY2(plots->loss_plot()->xAxis->range().upper <= kOwnJobSteps,
             qPrintable(QString::number(plots->loss_plot()->xAxis->range().upper)));
  }

  // A sweep another process records, here on another host: between two of its trials nothing of it runs,
  // yet Stop all still reaches it, and the header says when and how the sweep ended.
  void another_processs_sweep_is_followed_between_its_trials_and_to_its_end() {
    namespace db = commtune::db;
    QTemporaryDir dir;
    const auto path = dir.filePath("runs.db");
    std::int64_t sweep = 0, first = 0;
    {
      db::Store s(path.toStdString());
      sweep = s.create_sweep("elsewhere", {{"base", {{"world_size", 2}, {"steps", 20}}},
                                           {"axes", {{"optimizer.lr", {0.1, 0.2}}}}});
      for (const int trial : {0, 1}) {
        db::NewRun run;
        run.sweep_id = sweep;
        run.trial = trial;
        run.name = trial ? "lr=0.2" : "lr=0.1";
        run.config = {{"world_size", 2}, {"steps", 20}, {"optimizer", {{"lr", trial ? 0.2 : 0.1}}}};
        run.world_size = 2;
        run.steps_requested = 20;
        const auto id = s.create_run(run, trial ? db::status::kPending : db::status::kRunning);
        if (!trial) first = id;
      }
    }
    db::Connection(path.toStdString(), db::Connection::Access::ReadWrite)
        .exec("UPDATE runs SET owner = 'elsewhere:1:1' WHERE status = 'running'; "
              "UPDATE sweeps SET owner = 'elsewhere:1:1'");
    MainWindow window(path);
    window.show();
    auto* dashboard = window.dashboard();
    auto* stop_all = dashboard->findChild<QPushButton*>("dashboard:stop_all");
    auto* label = dashboard->findChild<QLabel*>("dashboard:label");
    QTRY_COMPARE_WITH_TIMEOUT(dashboard->status_of(first), QString("running"), 30000);
    QVERIFY(stop_all->isEnabled());
    // The first trial ends; the second has not started: the sweep still runs.
    db::Store(path.toStdString()).set_run_status(first, db::status::kSucceeded, "");
    QTRY_COMPARE_WITH_TIMEOUT(dashboard->status_of(first), QString("succeeded"), 30000);
    QVERIFY2(stop_all->isEnabled(), "Stop all greyed out between two trials of a running sweep");
    {
      // A window that puts the sweep on its Dashboard now, between the two trials, reaches it too.
      MainWindow other(path);
      auto* later = other.dashboard();
      later->show_sweep(sweep);
      QTRY_COMPARE_WITH_TIMEOUT(later->status_of(first), QString("succeeded"), 30000);
      QTRY_VERIFY_WITH_TIMEOUT(later->findChild<QPushButton*>("dashboard:stop_all")->isEnabled(), 30000);
    }
    // Stop all asks for the sweep (its process is on another host: a request file it watches).
    stop_all->click();
    const auto request = QString("%1.stop/sweep-%2").arg(path).arg(sweep);
    QVERIFY2(QFileInfo::exists(request), qPrintable(request));
    // Its process takes the request and the sweep ends cancelled: the header says so, Stop all has nothing left.
    QFile::remove(request);
    db::Store(path.toStdString()).set_sweep_status(sweep, db::status::kCancelled);
    QTRY_VERIFY2_WITH_TIMEOUT(label->text().startsWith(
                                  QString("Sweep %1 (recorded by another process) cancelled: 1 of 2 trials ended")
                                      .arg(sweep)),
                              qPrintable(label->text()), 30000);
    QVERIFY(!stop_all->isEnabled());
  }

  void seed_replicas_group_into_a_mean_and_a_band() {
    RunPlots plots;
    plots.resize(1000, 700);
    plots.show();
    // Three seeds of one configuration, one seed of another.
    const std::vector<std::pair<qint64, QString>> runs{{1, "1 lr=0.1 seed=0"}, {2, "2 lr=0.1 seed=1"},
                                                       {3, "3 lr=0.1 seed=2"}, {4, "4 lr=0.2 seed=0"}};
    for (const auto& [id, label] : runs) {
      plots.add_run(id, label);
      for (int step = 0; step < 50; ++step) {
        LivePoint p;
        p.run_id = id;
        p.step = step;
        p.wall_s = step * 0.1;
        p.loss = 2.0 + 0.1 * static_cast<double>(id) - 0.01 * step;
        plots.append(p);
      }
    }
    plots.refresh(true);
    QCOMPARE(plots.seed_groups().size(), std::size_t{1});
    QVERIFY(plots.shown_groups().empty());
    plots.set_group_seeds(true);
    QCOMPARE(plots.shown_groups().size(), std::size_t{1});
    QCOMPARE(plots.shown_groups()[0].runs, (std::vector<std::int64_t>{1, 2, 3}));
    // The mean of 2.1, 2.2 and 2.3 less the step's drop, one standard deviation (0.1) either side.
    auto* mean = plots.group_mean_graph(0);
    QCOMPARE(mean->dataCount(), 50);
    QVERIFY(std::abs(mean->data()->at(10)->value - (2.2 - 0.1)) < 1e-9);
    QVERIFY(std::abs(plots.group_band_graph(0, true)->data()->at(10)->value - (2.2 - 0.1 + 0.1)) < 1e-9);
    QVERIFY(std::abs(plots.group_band_graph(0, false)->data()->at(10)->value - (2.2 - 0.1 - 0.1)) < 1e-9);
    QVERIFY(!plots.loss_graph(1)->visible() && !plots.loss_graph(3)->visible());
    QVERIFY(plots.loss_graph(4)->visible());  // a single seed stays a curve
    plots.set_group_seeds(false);
    QVERIFY(plots.shown_groups().empty());
    QVERIFY(plots.loss_graph(1)->visible());
    // A resumed launch's clock starts again at 0: its points go on after the last one.
    plots.add_run(5, "5 lr=0.3");
    for (int step = 0; step < 20; ++step) {
      LivePoint p;
      p.run_id = 5;
      p.step = step;
      p.wall_s = (step < 10 ? step : step - 10) * 0.1;
      p.loss = 1.0;
      plots.append(p);
    }
    const auto points = plots.points_of(5);
    for (std::size_t i = 1; i < points.size(); ++i) QVERIFY(points[i].wall_s >= points[i - 1].wall_s);

    // A log loss axis over less than a decade fits the data, not a whole decade, mostly empty.
    plots.set_log_y(RunPlots::Plot::Loss, true);
    plots.refresh(true);
    const auto log_range = plots.loss_plot()->yAxis->range();
    QVERIFY2(log_range.upper / log_range.lower < 3, qPrintable(QString("%1 .. %2").arg(log_range.lower).arg(log_range.upper)));
    plots.loss_plot()->replot(QCustomPlot::rpImmediateRefresh);
    QVERIFY(plots.loss_plot()->yAxis->tickVectorLabels().size() >= 3);
    plots.set_log_y(RunPlots::Plot::Loss, false);
    // A new job's curves get axes of their own, not the last job's.
    plots.clear();
    plots.add_run(6, "6 lr=0.4");
    for (int step = 0; step < 10; ++step) {
      LivePoint p;
      p.run_id = 6;
      p.step = step;
      p.loss = 5.0 + step;
      plots.append(p);
    }
    plots.refresh(true);
    QVERIFY(plots.loss_plot()->xAxis->range().upper < 20);
    QVERIFY(plots.loss_plot()->yAxis->range().lower > 4 && plots.loss_plot()->yAxis->range().upper < 16);
  }

  // With Group seeds on, a group's curve reads as the group
  // (its label, seed count, mean and sd at the step), a click on it opens
  // the group's runs, and the trial list (the legend) lists the group as one
  // row, "label (n seeds)", in place of its runs.
  void a_seed_group_is_read_clicked_and_listed_as_one() {
    RunPlots plots;
    plots.resize(1000, 700);
    plots.show();
    const std::vector<std::pair<qint64, QString>> runs{{1, "1 lr=0.1 seed=0"}, {2, "2 lr=0.1 seed=1"},
                                                       {3, "3 lr=0.1 seed=2"}, {4, "4 lr=0.2 seed=0"}};
    for (const auto& [id, label] : runs) {
      plots.add_run(id, label);
      for (int step = 0; step < 50; ++step) {
        LivePoint p;
        p.run_id = id;
        p.step = step;
        p.wall_s = step * 0.1;
        p.loss = 2.0 + 0.1 * static_cast<double>(id) - 0.01 * step;
        plots.append(p);
      }
    }
    plots.set_group_seeds(true);
    plots.refresh(true);
    plots.loss_plot()->replot(QCustomPlot::rpImmediateRefresh);
    // The group's mean at step 10: 2.2 - 0.1, sd 0.1.
    auto* mean = plots.group_mean_graph(0);
    const QPointF at(mean->keyAxis()->coordToPixel(10), mean->valueAxis()->coordToPixel(2.1));
    const auto hit = plots.readout(RunPlots::Plot::Loss)->hover(at);
    QVERIFY2(hit, "nothing read on the group's curve");
    QVERIFY2(hit->text.contains("lr=0.1 (3 seeds)") && hit->text.contains("step 10") && hit->text.contains("mean loss 2.1") &&
                 hit->text.contains("sd 0.1"),
             qPrintable(hit->text));
    QCOMPARE(hit->runs, (std::vector<std::int64_t>{1, 2, 3}));
    QSignalSpy clicked(&plots, &RunPlots::runs_clicked);
    QTest::mouseClick(plots.loss_plot(), Qt::LeftButton, Qt::NoModifier, at.toPoint());
    QCOMPARE(clicked.count(), 1);
    QCOMPARE(clicked.at(0).at(0).value<std::vector<std::int64_t>>(), (std::vector<std::int64_t>{1, 2, 3}));
    // A single run's curve still reads and opens that run alone.
    auto* single = plots.loss_graph(4);
    const QPointF at_single(single->keyAxis()->coordToPixel(10), single->valueAxis()->coordToPixel(2.3));
    const auto single_hit = plots.readout(RunPlots::Plot::Loss)->hover(at_single);
    QVERIFY(single_hit && single_hit->runs == std::vector<std::int64_t>{4});
    // The legend: the group as one row, the single seed as its run; unchecking the group hides its curve.
    auto* list = plots.run_list();
    QStringList rows;
    QTreeWidgetItem* group_row = nullptr;
    for (int i = 0; i < list->topLevelItemCount(); ++i)
      if (auto* item = list->topLevelItem(i); !item->isHidden()) {
        rows << item->text(0);
        if (item->text(0).contains("seeds")) group_row = item;
      }
    QCOMPARE(rows.size(), 2);
    QVERIFY2(group_row && group_row->text(0) == "lr=0.1 (3 seeds)", qPrintable(rows.join(" | ")));
    QVERIFY(rows.contains("4"));
    group_row->setCheckState(0, Qt::Unchecked);  // as a click on its box
    QVERIFY(!mean->visible());
    QVERIFY(!plots.run_visible(1) && !plots.run_visible(3) && plots.run_visible(4));
    group_row->setCheckState(0, Qt::Checked);
    QVERIFY(mean->visible());
    // Off again: the runs are listed one by one.
    plots.set_group_seeds(false);
    int shown = 0;
    for (int i = 0; i < list->topLevelItemCount(); ++i) shown += list->topLevelItem(i)->isHidden() ? 0 : 1;
    QCOMPARE(shown, 4);

    // Two PowerSGD configurations' groups read apart in the list's width: the words that tell them apart,
    // under the columns' short names (whole, both were cut to "matrix_approximation_rank=1 start_po...").
    RunPlots powersgd;
    powersgd.resize(1000, 700);
    powersgd.show();
    int id = 0;
    for (const char* start : {"2", "10"})
      for (const char* seed : {"0", "1"}) {
        ++id;
        powersgd.add_run(id, QString("%1 matrix_approximation_rank=1 start_powerSGD_iter=%2 lr=0.05 seed=%3")
                                 .arg(id).arg(start, seed));
      }
    powersgd.set_group_seeds(true);
    QStringList groups;
    for (int i = 0; i < powersgd.run_list()->topLevelItemCount(); ++i)
      if (const auto* item = powersgd.run_list()->topLevelItem(i); !item->isHidden()) groups << item->text(0);
    groups.sort();
    QCOMPARE(groups, (QStringList{"start iter=10 (2 seeds)", "start iter=2 (2 seeds)"}));
    for (const auto& label : groups)  // within the 260 px the list has on a 1366-px screen
      QVERIFY2(powersgd.run_list()->fontMetrics().horizontalAdvance(label) < 230, qPrintable(label));
  }

  // Runs grouped by any parameter (W&B's group by), not only seeds, with mean and band.
  void runs_group_by_any_parameter_with_mean_and_band() {
    RunPlots plots;
    plots.resize(1000, 700);
    plots.show();
    const std::vector<std::pair<qint64, QString>> runs{{1, "1 rank=1 lr=0.1 momentum=0.9"},
                                                       {2, "2 rank=4 lr=0.1 momentum=0.9"},
                                                       {3, "3 rank=1 lr=0.2 momentum=0.9"},
                                                       {4, "4 rank=4 lr=0.2 momentum=0.9"},
                                                       {5, "5 allreduce"}};
    for (const auto& [id, label] : runs) {
      plots.add_run(id, label);
      for (int step = 0; step < 20; ++step) {
        LivePoint p;
        p.run_id = id;
        p.step = step;
        p.loss = static_cast<double>(id);
        plots.append(p);
      }
    }
    // What the Group list offers: seeds and what varies among the runs, not momentum (one value for all).
    const auto choices = [&plots] {
      QStringList out;
      auto* box = plots.findChild<QComboBox*>("plots:group_by");
      for (int i = 0; i < box->count(); ++i) out << box->itemText(i);
      return out;
    };
    QCOMPARE(choices(), (QStringList{"no grouping", "seeds", "rank", "lr"}));
    QVERIFY(!plots.set_group_by("momentum"));
    QVERIFY(plots.set_group_by("lr"));
    plots.refresh(true);
    const auto groups = plots.shown_groups();
    QCOMPARE(groups.size(), std::size_t{2});
    QCOMPARE(QString::fromStdString(groups[0].key), QString("lr=0.1"));
    QCOMPARE(groups[0].runs, (std::vector<std::int64_t>{1, 2}));
    QCOMPARE(plots.group_mean_graph(0)->data()->at(5)->value, 1.5);
    QCOMPARE(plots.group_mean_graph(1)->data()->at(5)->value, 3.5);
    QVERIFY(std::abs(plots.group_band_graph(1, true)->data()->at(5)->value - (3.5 + std::sqrt(0.5))) < 1e-9);
    QVERIFY(plots.loss_graph(5)->visible() && !plots.loss_graph(1)->visible());
    QStringList rows;
    for (int i = 0; i < plots.run_list()->topLevelItemCount(); ++i)
      if (!plots.run_list()->topLevelItem(i)->isHidden()) rows << plots.run_list()->topLevelItem(i)->text(0);
    QVERIFY2(rows.contains("lr=0.1 (2 runs)") && rows.contains("lr=0.2 (2 runs)") && rows.size() == 3,
             qPrintable(rows.join(" | ")));
    QVERIFY(plots.set_group_by("rank"));
    QCOMPARE(plots.shown_groups()[1].runs, (std::vector<std::int64_t>{2, 4}));
    // Other runs opened in their place: the last runs' parameters are no longer offered, and the choice of
    // rank comes back with runs whose ranks differ.
    plots.clear();
    for (const auto& [id, label] : std::vector<std::pair<qint64, QString>>{{6, "6 wd=0.1"}, {7, "7 wd=0.1"}})
      plots.add_run(id, label);
    QCOMPARE(choices(), (QStringList{"no grouping", "seeds"}));  // one value of wd: no group apart
    plots.add_run(8, "8 wd=0.2 rank=2");
    plots.add_run(9, "9 wd=0.2 rank=4");
    plots.add_run(10, "10 rank=4");
    QCOMPARE(choices(), (QStringList{"no grouping", "seeds", "wd", "rank"}));
    QCOMPARE(plots.findChild<QComboBox*>("plots:group_by")->currentText(), QString("rank"));
    QCOMPARE(plots.shown_groups().size(), std::size_t{1});  // rank=4: runs 9 and 10
    plots.set_group_seeds(false);
    QVERIFY(plots.shown_groups().empty());
  }

  // The front the Pareto plot draws (by bytes on the wire) is `compare
  // --json`'s pareto_front, run for run: one computation in core. Two start
  // iterations per rank send alike and reach the same loss: the first run
  // of each pair is on the front, on both sides.
  void the_pareto_front_is_the_clis() {
    QTemporaryDir dir;
    const auto path = dir.filePath("runs.db");
    const auto sweep = seed_sweep(path, {1, 2, 4, 8}, {2, 10});
    MainWindow window(path);
    auto* analysis = analyse_sweep(window, sweep);
    QTRY_VERIFY_WITH_TIMEOUT(analysis->data().runs.size() == 8 && !analysis->analysing(), 60000);
    const auto compared = cli_json({"--db", path, "compare", "--sweep", QString::number(sweep), "--json"});
    QVERIFY(compared.is_object());
    const auto cli_front = compared["pareto_front"].get<std::vector<std::int64_t>>();
    QCOMPARE(analysis->pareto_front_runs(), cli_front);
    QCOMPARE(cli_front.size(), std::size_t{4});  // one per rank
    QCOMPARE(analysis->plots()[0]->graph(1)->dataCount(), 4);  // and that is what is drawn

    // A point opens its run on the Runs page, listed and selected, though the table's filter hid it: the
    // filter goes.
    auto* runs = window.runs();
    runs->refresh();
    QTRY_VERIFY(!runs->loading());
    runs->search()->setText(QString("id = %1").arg(cli_front[0]));
    QCOMPARE(runs->visible_runs(), 1);
    Q_EMIT analysis->open_runs_requested({cli_front[1]});
    QTRY_COMPARE(runs->selected_runs(), (std::vector<std::int64_t>{cli_front[1]}));
    QVERIFY(runs->search()->text().isEmpty());
  }

  // A real sweep's store, over learning rates with a baseline at each, two seeds and two hooks. The
  // Runs page's comparison, the Analysis page's what-if table, predicted step times and Pareto front are the
  // CLI's numbers (compare, recommend, predict --json) on it.
  void one_store_gives_one_answer_on_both_sides() {
    QTemporaryDir dir;
    const auto path = dir.filePath("runs.db");
    const auto cli = QFileInfo(qEnvironmentVariable("COMMTUNE_WORKER")).dir().filePath("commtune-cli");
    QProcess sweep_process;
    sweep_process.start(cli, {"--db", path, "sweep", "--axis", "optimizer.lr=0.05,0.1", "--axis",
                              "hook.name=fp16_compress,bf16_compress", "--seeds", "2", "--set", "steps=30", "--set",
                              "world_size=2", "--set", "model.hidden=64", "--set", "data.features=32"});
    QVERIFY(sweep_process.waitForFinished(600000));
    const auto sweep_log = QString::fromUtf8(sweep_process.readAllStandardError());
    QVERIFY2(sweep_process.exitCode() == 0, qPrintable(sweep_log));
    const auto listed = cli_json({"--db", path, "list", "--json"});
    QCOMPARE(listed.size(), std::size_t{12});  // 2 lr x 2 seeds of allreduce, then 2 hooks x 2 lr x 2 seeds
    // One numbering: the sweep's log ("[trial N/12, run R]"), list and show give each run one trial number.
    std::map<std::int64_t, std::int64_t> logged_trial;
    for (auto m = QRegularExpression(R"(\[trial (\d+)/12, run (\d+)\])").globalMatch(sweep_log); m.hasNext();) {
      const auto found = m.next();
      logged_trial[found.captured(2).toLongLong()] = found.captured(1).toLongLong();
    }
    QCOMPARE(logged_trial.size(), std::size_t{12});
    for (const auto& run : listed) {
      const auto id = run["id"].get<std::int64_t>();
      QCOMPARE(run["trial"].get<std::int64_t>(), logged_trial.at(id));
      QProcess show;
      show.start(cli, {"--db", path, "show", QString::number(id)});
      QVERIFY(show.waitForFinished(60000));
      const auto shown = QString::fromUtf8(show.readAllStandardOutput());
      QVERIFY2(shown.contains(QString("sweep        1, trial %1\n").arg(logged_trial.at(id))), qPrintable(shown));
    }
    std::vector<std::int64_t> ids;
    for (const auto& run : listed) ids.push_back(run["id"].get<std::int64_t>());
    std::sort(ids.begin(), ids.end());

    MainWindow window(path);
    // Runs: each run's "vs base" is compare's, against the allreduce run at its own learning rate and seed.
    auto* runs = show_runs_page(window);
    QTRY_VERIFY(!runs->loading());
    runs->open_runs(ids);
    QTRY_VERIFY(!runs->loading());
    QTRY_COMPARE(runs->metrics()->rowCount(), 12);
    QStringList args{"--db", path, "compare", "--json", "--sweep", "1"};
    const auto compared = cli_json(args);
    QVERIFY(compared.is_object());
    const int column = column_of(runs->metrics(), "vs base");
    QVERIFY(column >= 0);
    for (int row = 0; row < 12; ++row) {
      const auto& cli_row = compared["runs"][static_cast<std::size_t>(row)];
      QCOMPARE(runs->metrics()->item(row, 0)->text().remove('*').toLongLong(), cli_row["id"].get<std::int64_t>());
      const auto change = cli_row["loss_change"];
      const auto want = change.is_null() ? QString("–")
                                         : QString("%1%2%").arg(change.get<double>() >= 0 ? "+" : "")
                                               .arg(100 * change.get<double>(), 0, 'f', 2);
      QCOMPARE(runs->metrics()->item(row, column)->text(), want);
    }
    // Its plots group by what varies among the runs, the seed among them (no sweep axis: --seeds).
    {
      auto* group_by = runs->findChild<QComboBox*>("plots:group_by");
      QStringList choices;
      for (int i = 0; i < group_by->count(); ++i) choices << group_by->itemText(i);
      QCOMPARE(choices, (QStringList{"no grouping", "seeds", "hook.name", "optimizer.lr", "seed"}));
    }
    // The Runs table has both losses under the names compare's JSON gives them, each compare's figure.
    {
      auto* model = runs->table()->model();
      std::map<QString, int> named;
      for (int c = 0; c < model->columnCount(); ++c) named[model->headerData(c, Qt::Horizontal).toString()] = c;
      QVERIFY(named.count("id") && named.count("last loss") && named.count("tail loss"));
      std::map<std::int64_t, nlohmann::json> digests;
      for (const auto& r : compared["runs"]) digests[r["id"].get<std::int64_t>()] = r["digest"];
      QCOMPARE(model->rowCount(), 12);
      for (int row = 0; row < 12; ++row) {
        const auto& digest = digests.at(model->index(row, named["id"]).data().toLongLong());
        for (const auto& [header, key] : {std::pair{"last loss", "last_loss"}, std::pair{"tail loss", "tail_loss"}})
          QCOMPARE(model->index(row, named[header]).data().toString(),
                   QString::number(digest[key].get<double>(), 'f', 5));
      }
    }

    // Analysis: every network's row is recommend's, every run's predicted step time predict's, the front compare's.
    auto* analysis = analyse_sweep(window, 1);
    QTRY_VERIFY_WITH_TIMEOUT(analysis->data().runs.size() == 12 && !analysis->analysing(), 60000);
    // Each run's seeds are those compare groups it with: two, unless a loaded machine's link probes
    // told its seeds apart (core/tuner/netmodel/network.h same_link), which both sides then say.
    std::map<std::int64_t, int> cli_seeds;
    for (const auto& configuration : compared["configurations"])
      for (const auto& id : configuration["runs"])
        cli_seeds[id.get<std::int64_t>()] = configuration["seeds"].get<int>();
    int grouped = 0;
    for (const auto& p : analysis->data().runs) {
      QCOMPARE(p.seeds, cli_seeds.count(p.run_id) ? cli_seeds[p.run_id] : 1);
      grouped += p.seeds == 2;
    }
    QVERIFY2(grouped > 0, "no configuration's two seeds were grouped");
    // The history plot numbers its points as the log does (it counted the search's trials alone, from 1).
    const auto history = commtune::optimization_history(analysis->data());
    QCOMPARE(history.trials.size(), std::size_t{8});
    auto* history_plot = analysis->findChild<QCustomPlot*>("plot:history");
    QCOMPARE(history_plot->graph(0)->dataCount(), 8);
    for (int i = 0; i < 8; ++i) {
      const auto& p = history.trials[static_cast<std::size_t>(i)];
      QCOMPARE(p.trial, logged_trial.at(p.run_id));
      QCOMPARE(history_plot->graph(0)->data()->at(i)->key, double(p.trial));
    }
    // A point that stands for two seeds reads as their mean, labelled so; one seed's as its own tail loss.
    analysis->findChild<QComboBox*>("analysis:slice_param")->setCurrentText("optimizer.lr");
    auto* slice = analysis->findChild<QCustomPlot*>("plot:slice");
    slice->replot(QCustomPlot::rpImmediateRefresh);
    QVERIFY(slice->graph(0)->dataCount() > 0);
    for (int i = 0; i < slice->graph(0)->dataCount(); ++i) {
      const auto point = slice->graph(0)->data()->at(i);
      const auto read = analysis->slice_readout()->hover(
          QPointF(slice->xAxis->coordToPixel(point->key), slice->yAxis->coordToPixel(point->value)));
      QVERIFY(read && !read->runs.empty());
      const auto seeds = cli_seeds.count(read->runs.front()) ? cli_seeds[read->runs.front()] : 1;
      QVERIFY2(seeds > 1 ? read->text.contains(QString("mean tail loss of %1 seeds ").arg(seeds))
                         : read->text.contains("tail loss ") && !read->text.contains("mean"),
               qPrintable(read->text));
    }
    const auto& presets = commtune::net::link_presets();
    QCOMPARE(analysis->data().networks.size(), presets.size());
    for (std::size_t i = 0; i < presets.size(); ++i) {
      const auto& row = analysis->data().networks[i];
      const auto r = cli_json({"--db", path, "recommend", "--sweep", "1", "--network",
                               QString::fromStdString(presets[i].name), "--json"});
      QVERIFY2(r.is_object(), presets[i].name.c_str());
      QCOMPARE(QString::fromStdString(row.verdict), QString::fromStdString(r["verdict"].get<std::string>()));
      QCOMPARE(row.best_run.has_value(), !r["chosen_run"].is_null());
      QCOMPARE(row.baseline_run.value_or(-1), r["baseline_run"].get<std::int64_t>());
      // Each candidate's reason, as `recommend` gives it, fastest first, in the verdict's tooltip.
      std::vector<std::string> reasons;
      for (const auto& c : r["candidates"])
        if (!c["baseline"].get<bool>()) reasons.push_back(c["reason"].get<std::string>());
      QCOMPARE(row.reasons.size(), reasons.size());
      const auto tip = analysis->what_if_table()->item(static_cast<int>(i), 5)->toolTip();
      for (std::size_t k = 0; k < reasons.size(); ++k) {
        QVERIFY2(QString::fromStdString(row.reasons[k]).endsWith(QString::fromStdString(": " + reasons[k])),
                 (row.reasons[k] + " | " + reasons[k]).c_str());
        QVERIFY2(tip.contains(QString::fromStdString(row.reasons[k])), qPrintable(tip));
      }
    }
    const auto predicted = cli_json({"--db", path, "predict", "--sweep", "1", "--network", "10gbit", "--json"});
    QVERIFY(predicted.is_object());
    std::map<std::int64_t, double> cli_ms;
    for (const auto& configuration : predicted["runs"])
      for (const auto& run : configuration["runs"])
        cli_ms[run.get<std::int64_t>()] = 1e3 * configuration["predictions"][0]["step_s_interval"]["value"].get<double>();
    for (const auto& p : analysis->data().runs) QCOMPARE(*p.predicted_ms, cli_ms.at(p.run_id));
    QCOMPARE(analysis->pareto_front_runs(), compared["pareto_front"].get<std::vector<std::int64_t>>());
  }

  void close_pareto_points_keep_their_labels_apart() {
    // Ranks 50 to 53 send within 6% of each other and differ in loss by 0.1% of the plot's range
    // (rank 1 stretches it): four front points within a few pixels, each labelled.
    QTemporaryDir dir;
    const auto path = dir.filePath("runs.db");
    const auto sweep = seed_sweep(path, {1, 50, 51, 52, 53}, {2});
    MainWindow window(path);
    window.resize(1400, 900);
    auto* analysis = analyse_sweep(window, sweep);
    QTRY_VERIFY_WITH_TIMEOUT(analysis->data().runs.size() == 5 && !analysis->analysing(), 60000);
    auto* pareto = analysis->plots()[0];
    analysis->views()->setCurrentIndex(0);
    pareto->replot(QCustomPlot::rpImmediateRefresh);
    std::vector<QRectF> rects;
    for (int i = 0; i < pareto->itemCount(); ++i)
      if (auto* text = qobject_cast<QCPItemText*>(pareto->item(i)); text && text->objectName() == "pareto:label")
        rects.emplace_back(text->topLeft->pixelPosition(), text->bottomRight->pixelPosition());
    QCOMPARE(rects.size(), std::size_t{5});
    // Drawn at their points, the four labels would cover each other: there is something to keep apart.
    auto* front = pareto->graph(1);
    QCOMPARE(front->dataCount(), 5);
    const auto pixel = [&](int i) {
      const auto d = front->data()->at(i);
      return QPointF(pareto->xAxis->coordToPixel(d->key), pareto->yAxis->coordToPixel(d->value));
    };
    for (int i = 2; i < 5; ++i)
      QVERIFY2(std::abs(pixel(i).y() - pixel(1).y()) < rects[0].height() &&
                   std::abs(pixel(i).x() - pixel(1).x()) < rects[0].width(),
               qPrintable(QString("front point %1 is %2 px from point 1").arg(i).arg(QLineF(pixel(i), pixel(1)).length())));
    for (std::size_t i = 0; i < rects.size(); ++i)
      for (std::size_t j = i + 1; j < rects.size(); ++j)
        QVERIFY2(!rects[i].adjusted(1, 1, -1, -1).intersects(rects[j].adjusted(1, 1, -1, -1)),
                 qPrintable(QString("labels %1 and %2 overlap").arg(i).arg(j)));
  }

  void step_functions_and_constants_keep_their_shape() {
    RunPlots plots;
    plots.resize(1000, 700);
    plots.show();
    plots.add_run(1, "1 powersgd");
    // PowerSGD from step 10: allreduce's ratio 1 before, 4000 from there on; bytes constant before and after.
    feed_run(
        plots, 1, [](int step) { return 2.0 - 0.01 * step + 0.05 * ((step % 2) ? 1 : -1); },
        [](int step) { return step < 10 ? 4e6 : 1e3; });
    plots.set_smoothing(0.9);
    plots.refresh(true);
    // Smoothing bends the noisy loss, never the ratio's step: 1 up to step 9, 4000 from step 10.
    auto* ratio = plots.plot(RunPlots::Plot::Ratio);
    QVERIFY(plots.loss_graph(1)->data()->at(10)->value != 2.0 - 0.1 - 0.05);
    for (const auto& point : *ratio->graph(0)->data()) QCOMPARE(point.value, point.key < 10 ? 1.0 : 4000.0);
    plots.set_smoothing(0);

    // A constant series alone on its plot: +-5% around it, whatever range the axis had before.
    RunPlots flat;
    flat.resize(1000, 700);
    flat.show();
    flat.add_run(2, "2 fp16");
    feed_run(flat, 2, [](int) { return 1.0; }, [](int) { return 2e6; });
    flat.refresh(true);
    const auto range = flat.plot(RunPlots::Plot::Ratio)->yAxis->range();
    QVERIFY2(std::abs(range.lower - 1.9) < 1e-9 && std::abs(range.upper - 2.1) < 1e-9,
             qPrintable(QString("%1 .. %2").arg(range.lower, 0, 'g', 10).arg(range.upper, 0, 'g', 10)));
  }

  void drawn_values_get_a_filled_contour() {
    QTemporaryDir dir;
    const auto path = dir.filePath("runs.db");
    const auto sweep = seed_drawn_sweep(path);
    MainWindow window(path);
    auto* analysis = analyse_sweep(window, sweep);
    QTRY_VERIFY_WITH_TIMEOUT(analysis->data().runs.size() == 12 && !analysis->analysing(), 60000);
    auto* heatmap = analysis->plots()[1];
    auto* contour = heatmap->findChild<QCPColorMap*>("heatmap:contour");
    QVERIFY2(contour, "12 drawn trials on a 12 x 12 grid: a contour, not a heatmap of blank cells");
    std::set<double> levels;
    for (int i = 0; i < contour->data()->keySize(); ++i)
      for (int j = 0; j < contour->data()->valueSize(); ++j) levels.insert(contour->data()->cell(i, j));
    QVERIFY(levels.size() >= 3 && levels.size() <= 8);
    auto* trials = heatmap->findChild<QCPGraph*>("heatmap:trials");
    QVERIFY(trials);
    QCOMPARE(trials->dataCount(), 12);
    QVERIFY2(heatmap->xAxis->label().contains("(log)") != heatmap->yAxis->label().contains("(log)"),  // lr only
             qPrintable(heatmap->xAxis->label() + " / " + heatmap->yAxis->label()));
    heatmap->replot(QCustomPlot::rpImmediateRefresh);
    const auto dot = trials->data()->at(3);
    const auto read = analysis->heatmap_readout()->hover(
        QPointF(heatmap->xAxis->coordToPixel(dot->key), heatmap->yAxis->coordToPixel(dot->value)));
    QVERIFY2(read && read->text.contains("optimizer.lr = ") && read->text.contains("tail loss"),
             qPrintable(read ? read->text : ""));
  }

  void plugins_appear_in_the_forms_like_built_ins() {
    MainWindow window(store());
    auto* form = window.launch()->form();
    auto* hooks = form->field("hook.name")->findChild<QComboBox*>();
    QVERIFY(hooks->findText("threshold_sparsify") >= 0);
    form->set_text("hook.name", "byteps");
    auto* kinds = form->field("hook.byteps_compressor_type")->findChild<QComboBox*>();
    QVERIFY(kinds->findText("terngrad") >= 0);
    form->set_text("hook.byteps_compressor_type", "terngrad");
    QVERIFY2(form->problem().isEmpty(), qPrintable(form->problem()));
    form->set_text("hook.name", "threshold_sparsify");
    QVERIFY(form->field("hook.threshold"));
    form->set_text("hook.threshold", "-1");
    QVERIFY2(form->problem().startsWith("hook.threshold:"), qPrintable(form->problem()));
    form->set_text("hook.threshold", "0.001");
    window.launch()->sweep()->add_axis("hook.threshold", "0.0001, 0.001, 0.01");
    QCOMPARE(window.launch()->sweep()->trials(), 4);
  }

  void sweep_axes_come_from_the_schema() {
    MainWindow window(store());
    auto* launch = window.launch();
    launch->form()->set_text("hook.name", "powersgd");
    launch->form()->set_text("hook.start_powerSGD_iter", "2");
    launch->sweep()->add_axis("hook.matrix_approximation_rank", "1, 2, 4");
    QVERIFY2(launch->sweep()->problem().isEmpty(), qPrintable(launch->sweep()->problem()));
    QCOMPARE(launch->sweep()->trials(), 4);  // 3 + the allreduce baseline
    launch->sweep()->add_axis("optimizer.lr", "0.01 .. 0.1", 3, true);
    QCOMPARE(launch->sweep()->trials(), 12);  // 9 + an allreduce baseline at each learning rate
    // "Add axis" offers what is not an axis yet (it always offered optimizer.lr).
    launch->findChild<QPushButton*>("sweep:add_axis")->click();
    QCOMPARE(launch->sweep()->axis_params().last(), QString("hook.start_powerSGD_iter"));
    auto* offered = launch->sweep()->findChild<QTableWidget*>("sweep:axes")->cellWidget(2, 0);
    auto* names = static_cast<QComboBox*>(offered)->view();
    QVERIFY(names->font().pointSizeF() >= launch->font().pointSizeF());
    QVERIFY(names->minimumWidth() >= names->fontMetrics().horizontalAdvance("hook.orthogonalization_epsilon"));
    launch->findChild<QTableWidget*>("sweep:axes")->setCurrentCell(2, 1);
    launch->sweep()->findChild<QPushButton*>("sweep:remove_axis")->click();
    QCOMPARE(launch->sweep()->axis_params().size(), 2);
    // The sweep has a name field, and the spec carries it.
    launch->sweep()->set_option("name", "rank by lr");
    QCOMPARE(launch->sweep()->spec()["name"].get<std::string>(), std::string("rank by lr"));
    launch->sweep()->add_axis("hook.no_such_knob", "1");
    QVERIFY2(launch->sweep()->problem().contains("no_such_knob"), qPrintable(launch->sweep()->problem()));
    launch->sweep()->set_option("parallel", "0");
    QVERIFY2(launch->sweep()->problem().startsWith("parallel"), qPrintable(launch->sweep()->problem()));

    // TPE, as the schema offers it: its trials are planned, their values drawn as they start.
    MainWindow other(store());
    auto* tpe = other.launch();
    tpe->form()->set_text("hook.name", "powersgd");
    tpe->sweep()->add_axis("hook.matrix_approximation_rank", "1, 2, 4");
    tpe->sweep()->add_axis("optimizer.lr", "0.001 .. 0.1", 0, true);
    tpe->sweep()->set_option("strategy", "tpe");
    tpe->sweep()->set_option("trials", "12");
    tpe->sweep()->set_option("objective", "tail_loss,step_time");
    // TPE draws the learning rate as it goes: no baseline can be planned at each value.
    QVERIFY2(tpe->sweep()->problem().startsWith("axes.optimizer.lr"), qPrintable(tpe->sweep()->problem()));
    tpe->sweep()->set_option("baseline", "false");
    // PowerSGD's default start iteration (1000) is beyond the 200 steps: every trial would be allreduce.
    QVERIFY2(tpe->sweep()->problem().contains("hook.start_powerSGD_iter") &&
                 tpe->sweep()->problem().contains("allow_inactive_hooks"),
             qPrintable(tpe->sweep()->problem()));
    tpe->form()->set_text("hook.start_powerSGD_iter", "2");
    QVERIFY2(tpe->sweep()->problem().isEmpty(), qPrintable(tpe->sweep()->problem()));
    QCOMPARE(tpe->sweep()->trials(), 12);

    // A single run whose hook never acts is started if asked, but said so first.
    MainWindow single(store());
    single.launch()->form()->set_text("hook.name", "powersgd");
    single.launch()->form()->set_text("steps", "60");
    QVERIFY2(single.launch()->problem_text().contains("never acts"), qPrintable(single.launch()->problem_text()));
    single.launch()->form()->set_text("hook.start_powerSGD_iter", "10");
    QVERIFY2(!single.launch()->problem_text().contains("never acts"), qPrintable(single.launch()->problem_text()));
  }

  // The user's own script as the job: its fields in the form, its named options offered as sweep axes, its
  // trial live on the Dashboard, and Stop ending every process of it.
  void a_script_trial_streams_on_the_dashboard_and_stops() {
    MainWindow window(store());
    window.show();
    auto* form = window.launch()->form();
    const auto tag = QString("gui-script-%1").arg(QCoreApplication::applicationPid());
    type_into(form->field("script.path"), QString(COMMTUNE_SOURCE_DIR) + "/tests/script_trials/train_ddp.py");
    type_into(form->field("script.python"), COMMTUNE_ORACLE_PYTHON);
    type_into(form->field("script.steps_arg"), "steps");
    type_into(form->field("script.options"), "lr=0.05 tag=" + tag);
    type_into(form->field("script.arguments"), "--start-iter '3'");
    type_into(form->field("world_size"), "2");
    type_into(form->field("steps"), "100000");
    type_into(form->field("hook.name"), "powersgd");
    QTRY_VERIFY(form->field("hook.matrix_approximation_rank"));
    type_into(form->field("hook.start_powerSGD_iter"), "3");
    QTRY_VERIFY2(form->problem().isEmpty(), qPrintable(form->problem()));
    QCOMPARE(form->raw()["script"]["args"], (nlohmann::json{{"lr", 0.05}, {"tag", tag.toStdString()}}));
    QCOMPARE(form->raw()["script"]["argv"], (nlohmann::json{"--start-iter", "3"}));
    QVERIFY(form->axis_paths().contains("script.args.lr"));
    QVERIFY(!form->axis_paths().contains("script.options"));
    type_into(form->field("script.arguments"), "--start-iter '3");  // a quote never closed: named, and not kept
    QVERIFY(form->field("script.arguments")->has_error());
    QVERIFY2(form->problem().startsWith("script.arguments: "), qPrintable(form->problem()));
    type_into(form->field("script.arguments"), "--start-iter 3");
    QTRY_VERIFY2(form->problem().isEmpty(), qPrintable(form->problem()));

    QSignalSpy started(&window.engine(), &EngineSession::run_started);
    QSignalSpy finished(&window.engine(), &EngineSession::job_finished);
    QTest::mouseClick(window.launch()->run_button(), Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(started.count(), 1, 120000);
    const auto run_id = started.at(0).at(0).value<RunStart>().run_id;
    auto* plots = window.dashboard()->plots();
    QTRY_VERIFY_WITH_TIMEOUT(plots->points(run_id) >= 20, 120000);
    QVERIFY(std::isfinite(plots->loss_graph(run_id)->data()->at(0)->value));
    QTRY_VERIFY(plots->bucket_rows() >= 1);  // the script's buckets, as the engine's

    auto* stop = window.dashboard()->findChild<QPushButton*>(QString("dashboard:stop:%1").arg(run_id));
    QVERIFY(stop);
    QTest::mouseClick(stop, Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
    QTRY_COMPARE(window.dashboard()->status_of(run_id), QString("cancelled"));
    QProcess pgrep;  // torchrun and both ranks are gone
    QTRY_VERIFY_WITH_TIMEOUT((pgrep.start("pgrep", {"-f", tag}), pgrep.waitForFinished(), pgrep.exitCode() == 1), 15000);
    commtune::db::Store s(store().toStdString(), commtune::db::Store::Access::ReadOnly);
    QCOMPARE(QString::fromStdString(s.run(run_id)->status), QString("cancelled"));
    QCOMPARE(s.run(run_id)->config["script"]["args"]["tag"].get<std::string>(), tag.toStdString());
    QVERIFY(static_cast<std::size_t>(s.steps_of_every_rank(run_id)) >= plots->points(run_id));
  }

  void a_run_streams_stops_and_exports() {
    MainWindow window(store());
    window.show();
    auto* form = window.launch()->form();
    type_into(form->field("world_size"), "2");
    type_into(form->field("device"), "cpu");
    type_into(form->field("steps"), "100000");
    type_into(form->field("hook.name"), "powersgd");
    QTRY_VERIFY(form->field("hook.matrix_approximation_rank"));
    type_into(form->field("hook.matrix_approximation_rank"), "2");
    type_into(form->field("hook.start_powerSGD_iter"), "3");
    QVERIFY2(form->problem().isEmpty(), qPrintable(form->problem()));

    QSignalSpy started(&window.engine(), &EngineSession::run_started);
    QSignalSpy finished(&window.engine(), &EngineSession::job_finished);
    QTest::mouseClick(window.launch()->run_button(), Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(started.count(), 1, 60000);
    const auto run_id = started.at(0).at(0).value<RunStart>().run_id;
    QVERIFY(!window.launch()->run_button()->isEnabled());  // one job at a time

    // Points arrive on the dashboard's plots.
    auto* plots = window.dashboard()->plots();
    QTRY_VERIFY_WITH_TIMEOUT(plots->points(run_id) >= 20, 60000);
    QVERIFY(plots->loss_graph(run_id)->dataCount() >= 20);
    QVERIFY(std::isfinite(plots->loss_graph(run_id)->data()->at(0)->value));

    // Stop it from its row.
    auto* stop = window.dashboard()->findChild<QPushButton*>(QString("dashboard:stop:%1").arg(run_id));
    QVERIFY(stop);
    QTest::mouseClick(stop, Qt::LeftButton);
    // The spies count emissions on the engine's thread; the window hears of them through its event queue.
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
    QTRY_COMPARE(window.dashboard()->status_of(run_id), QString("cancelled"));
    QTRY_VERIFY(window.launch()->run_button()->isEnabled());

    // The store has it, cancelled, with every point the plot showed.
    {
      commtune::db::Store s(store().toStdString(), commtune::db::Store::Access::ReadOnly);
      QCOMPARE(QString::fromStdString(s.run(run_id)->status), QString("cancelled"));
      QVERIFY(static_cast<std::size_t>(s.steps_of_every_rank(run_id)) >= plots->points(run_id));
    }

    // Found in the browser by searching.
    window.show_page(MainWindow::kRuns);
    auto* runs = window.runs();
    runs->refresh();
    QTRY_VERIFY(!runs->loading());
    runs->search()->setText("powersgd");
    QVERIFY(runs->visible_runs() >= 1);
    runs->search()->setText("no run is called this");
    QCOMPARE(runs->visible_runs(), 0);
    runs->search()->clear();
    runs->open_runs({run_id});
    QTRY_VERIFY(!runs->loading());
    QCOMPARE(runs->selected_runs(), std::vector<std::int64_t>{run_id});
    QVERIFY(runs->plots()->points(run_id) >= 20);
    QVERIFY(runs->plots()->bucket_rows() >= 1);  // the stored run's per-bucket statistics, as live

    // Exported: a PowerSGDState file that PyTorch 1.13 loads, plots and data.
    ExportDialog dialog(store(), run_id, runs->plots());
    QTRY_VERIFY(dialog.ready());
    const auto out = dir_.filePath("export");
    dialog.set_folder(out);
    QSignalSpy written(&dialog, &ExportDialog::finished_writing);
    dialog.export_production();
    QTRY_COMPARE_WITH_TIMEOUT(written.count(), 1, 30000);
    QVERIFY2(written.at(0).at(1).toString().isEmpty(), qPrintable(written.at(0).at(1).toString()));
    QVERIFY(dialog.snippet().contains("PowerSGDState"));
    const auto state = QDir(out).filePath("powersgd_state.pt");
    QVERIFY(QFile::exists(state));
    QProcess python;
    python.start("/usr/bin/python3",
                 {"-c",
                  "import sys, torch\n"
                  "from torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook import PowerSGDState\n"
                  "d = torch.load(sys.argv[1], weights_only=True)\n"
                  "s = PowerSGDState(None, **{k: v.item() if torch.is_tensor(v) else v for k, v in "
                  "d['hyperparameters'].items()})\n"
                  "print(s.matrix_approximation_rank, s.start_powerSGD_iter)\n",
                  state});
    QVERIFY(python.waitForFinished(120000));
    QCOMPARE(python.exitCode(), 0);
    QCOMPARE(QString::fromUtf8(python.readAllStandardOutput()).trimmed(), QString("2 3"));

    for (const QString format : {"png", "svg", "pdf"}) {
      dialog.save_plots(format);
      QFile plot(QDir(out).filePath("loss." + format));
      QVERIFY2(plot.open(QIODevice::ReadOnly), qPrintable(dialog.status()));
      const auto head = plot.read(8);
      if (format == "png") QCOMPARE(head.mid(1, 3), QByteArray("PNG"));
      if (format == "svg") QVERIFY(head.startsWith("<?xml"));
      if (format == "pdf") QVERIFY(head.startsWith("%PDF"));
    }
    dialog.save_csv();
    QFile csv(QDir(out).filePath("curves.csv"));
    QVERIFY(csv.open(QIODevice::ReadOnly));
    const auto lines = QString::fromUtf8(csv.readAll()).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(static_cast<std::size_t>(lines.size()), runs->plots()->points(run_id) + 1);
  }

  void a_sweep_from_the_form_is_analysed() {
    MainWindow window(store());
    window.resize(1360, 860);  // the what-if rows below are checked at this size (the offscreen screen is 800 high)
    window.show();
    auto* launch = window.launch();
    launch->load_json({{"steps", 40},
                       {"world_size", 2},
                       {"device", "cpu"},
                       {"hook", {{"name", "powersgd"}, {"start_powerSGD_iter", 2}}}});
    launch->sweep()->add_axis("hook.matrix_approximation_rank", "1, 2");
    launch->sweep()->add_axis("hook.start_powerSGD_iter", "2, 5");
    launch->show_sweep(true);
    QCOMPARE(launch->sweep()->trials(), 5);
    QSignalSpy finished(&window.engine(), &EngineSession::job_finished);
    QTest::mouseClick(launch->sweep_button(), Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 240000);
    QVERIFY2(finished.at(0).at(1).toBool(), qPrintable(finished.at(0).at(0).toString()));
    for (int row = 0; row < 5; ++row)
      QTRY_COMPARE(window.dashboard()->findChild<QTableWidget*>("dashboard:trials")->item(row, 2)->text(),
                   QString("succeeded"));

    commtune::db::Store s(store().toStdString(), commtune::db::Store::Access::ReadOnly);
    const auto sweep_id = s.sweeps().back().id;
    auto* analysis = window.analysis();
    QSignalSpy analysed(analysis, &AnalysisPage::analysed);
    analysis->select_sweep(sweep_id);
    analysis->refresh();
    QTRY_VERIFY_WITH_TIMEOUT(analysed.count() >= 1 && analysis->data().runs.size() == 5, 60000);
    QCOMPARE(analysis->data().axes.size(), std::size_t{2});
    QCOMPARE(static_cast<std::size_t>(analysis->what_if_table()->rowCount()), commtune::net::link_presets().size());
    // The what-if table shows every network without moving the splitter.
    auto* what_if = analysis->what_if_table();
    window.show_page(MainWindow::kAnalysis);
    const int last = what_if->rowCount() - 1;
    QTRY_VERIFY2(what_if->rowViewportPosition(last) + what_if->rowHeight(last) <= what_if->viewport()->height(),
                 qPrintable(QString("row %1 at %2, viewport %3").arg(last).arg(what_if->rowViewportPosition(last))
                                .arg(what_if->viewport()->height())));
    int baselines = 0;
    for (const auto& p : analysis->data().runs) {
      baselines += p.baseline;
      QVERIFY(p.predicted_ms && *p.predicted_ms > 0);
      if (!p.baseline) QCOMPARE(p.axis_values.size(), std::size_t{2});
    }
    QCOMPARE(baselines, 1);

    // A faster target device: the predictions shrink and every verdict says which compute it assumed.
    std::map<std::int64_t, double> here;
    for (const auto& p : analysis->data().runs) here[p.run_id] = *p.predicted_ms;
    QVERIFY2(analysis->data().networks.front().verdict.find("this machine's, pooled over") != std::string::npos,
             analysis->data().networks.front().verdict.c_str());
    const int before = analysed.count();
    analysis->findChild<QDoubleSpinBox*>("analysis:compute_scale")->setValue(0.01);
    QTRY_VERIFY_WITH_TIMEOUT(analysed.count() > before && analysis->data().runs.size() == 5, 60000);
    for (const auto& p : analysis->data().runs) QVERIFY(*p.predicted_ms < here[p.run_id]);
    for (const auto& row : analysis->data().networks)
      QVERIFY2(row.verdict.find("x 0.01") != std::string::npos, row.verdict.c_str());

    // The loss tolerance is the user's: at 100% a compressed trial is recommended somewhere.
    const int before_tolerance = analysed.count();
    analysis->tolerance()->setValue(100);
    QTRY_VERIFY_WITH_TIMEOUT(analysed.count() > before_tolerance && analysis->data().runs.size() == 5, 60000);
    QVERIFY(std::any_of(analysis->data().networks.begin(), analysis->data().networks.end(),
                        [](const commtune::NetworkAdvice& row) { return !row.best.empty() && row.best != "keep allreduce"; }));

    // Each row is `recommend`'s answer on that network (one answer everywhere): the same cluster, choice and
    // verdict, word for word, for the same tolerance and target compute.
    const auto& presets = commtune::net::link_presets();
    QCOMPARE(analysis->data().networks.size(), presets.size());
    for (std::size_t i = 0; i < presets.size(); ++i) {
      const auto& row = analysis->data().networks[i];
      const auto cli = cli_json({"--db", store(), "recommend", "--sweep", QString::number(sweep_id), "--network",
                                 QString::fromStdString(presets[i].name), "--tolerance", "1", "--compute-scale",
                                 "0.01", "--json"});
      QVERIFY2(cli.is_object(), presets[i].name.c_str());
      QCOMPARE(QString::fromStdString(row.network), QString::fromStdString(cli["cluster"].get<std::string>()));
      QCOMPARE(QString::fromStdString(row.verdict), QString::fromStdString(cli["verdict"].get<std::string>()));
      QCOMPARE(row.best_run.has_value(), !cli["chosen_run"].is_null());
      if (row.best_run) QCOMPARE(*row.best_run, cli["chosen_run"].get<std::int64_t>());
      // The allreduce figure says which baseline run it is, since it changes with the tolerance.
      const auto baseline = cli["baseline_run"].get<std::int64_t>();
      QCOMPARE(row.baseline_run.value_or(-1), baseline);
      QVERIFY2(analysis->what_if_table()->item(static_cast<int>(i), 1)->text().endsWith(QString("(run %1)").arg(baseline)),
               qPrintable(analysis->what_if_table()->item(static_cast<int>(i), 1)->text()));
    }
    // And each run's predicted step time on the page's network (10gbit) is `predict`'s for its configuration.
    const auto predicted = cli_json({"--db", store(), "predict", "--sweep", QString::number(sweep_id), "--network",
                                     "10gbit", "--compute-scale", "0.01", "--json"});
    QVERIFY(predicted.is_object());
    std::map<std::int64_t, double> cli_ms;
    for (const auto& configuration : predicted["runs"])
      for (const auto& run : configuration["runs"])
        cli_ms[run.get<std::int64_t>()] = 1e3 * configuration["predictions"][0]["step_s_interval"]["value"].get<double>();
    for (const auto& p : analysis->data().runs) {
      QVERIFY(cli_ms.count(p.run_id));
      QCOMPARE(*p.predicted_ms, cli_ms[p.run_id]);
    }
  }

  // A sweep whose trials are SLURM jobs (scripts/slurm-local.sh's SLURM on
  // this machine), chosen in the form: its trials stream onto the Dashboard
  // while their jobs run, as local ones do.
  void a_slurm_sweep_shows_its_trials_live_on_the_dashboard() {
    const QString slurm_dir = dir_.filePath("slurm");
    const QString script = QStringLiteral(COMMTUNE_SOURCE_DIR "/scripts/slurm-local.sh");
    QProcess start;
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("SLURM_LOCAL_DIR", slurm_dir);
    start.setProcessEnvironment(env);
    start.start(script, {"start"});
    QVERIFY(start.waitForFinished(120000));
    if (start.exitCode() == 77) QSKIP(qPrintable(QString::fromUtf8(start.readAllStandardError()).trimmed()));
    QCOMPARE(start.exitCode(), 0);
    const auto conf = QString::fromUtf8(start.readAllStandardOutput()).trimmed().section('=', 1);
    qputenv("SLURM_CONF", conf.toUtf8());
    struct StopSlurm {
      QProcessEnvironment env;
      QString script;
      ~StopSlurm() {
        QProcess stop;
        stop.setProcessEnvironment(env);
        stop.start(script, {"stop"});
        stop.waitForFinished(60000);
        qunsetenv("SLURM_CONF");
      }
    } stop_slurm{env, script};

    MainWindow window(store());
    window.show();
    auto* launch = window.launch();
    launch->load_json({{"steps", 1500}, {"world_size", 2}, {"device", "cpu"},
                       {"model", {{"hidden", 64}}}, {"data", {{"features", 32}}}});
    auto* sweep = launch->sweep();
    sweep->add_axis("optimizer.lr", "0.02, 0.05");
    sweep->set_option("baseline", "false");
    sweep->set_option("backend", "slurm");
    sweep->set_option("slurm.ranks_per_node", "2");
    sweep->set_option("slurm.folder", dir_.filePath("jobs"));
    sweep->set_option("slurm.poll_s", "0.2");
    launch->show_sweep(true);
    QVERIFY2(sweep->problem().isEmpty(), qPrintable(sweep->problem()));
    QCOMPARE(sweep->trials(), 2);
    QSignalSpy started(&window.engine(), &EngineSession::run_started);
    QSignalSpy finished(&window.engine(), &EngineSession::job_finished);
    QTest::mouseClick(launch->sweep_button(), Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(started.count(), 1, 120000);
    const auto first = started.at(0).at(0).value<RunStart>().run_id;
    // Live: points on the plots while the trial's job still runs.
    QTRY_VERIFY_WITH_TIMEOUT(window.dashboard()->plots()->points(first) >= 5, 120000);
    QCOMPARE(window.dashboard()->status_of(first), QString("running"));
    QVERIFY(window.dashboard()->plots()->points(first) < 1500);
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 300000);
    QVERIFY2(finished.at(0).at(1).toBool(), qPrintable(finished.at(0).at(0).toString()));
    auto* trials = window.dashboard()->findChild<QTableWidget*>("dashboard:trials");
    for (int row = 0; row < 2; ++row) QTRY_COMPARE(trials->item(row, 2)->text(), QString("succeeded"));
    commtune::db::Store s(store().toStdString(), commtune::db::Store::Access::ReadOnly);
    QCOMPARE(s.events(first, "slurm_job").size(), std::size_t{1});  // it ran as a SLURM job
    QCOMPARE(s.steps_of_every_rank(first), std::int64_t{1500});
  }

  void stopping_a_trial_lets_the_sweep_go_on_and_stop_all_ends_it() {
    MainWindow window(store());
    window.show();
    auto* launch = window.launch();
    launch->load_json({{"steps", 100000}, {"world_size", 2}, {"device", "cpu"}});
    launch->sweep()->add_axis("optimizer.lr", "0.01, 0.02, 0.04");
    launch->sweep()->set_option("baseline", "false");
    launch->show_sweep(true);
    QCOMPARE(launch->sweep()->trials(), 3);
    QSignalSpy started(&window.engine(), &EngineSession::run_started);
    QSignalSpy finished(&window.engine(), &EngineSession::job_finished);
    QTest::mouseClick(launch->sweep_button(), Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(started.count(), 1, 60000);
    const auto first = started.at(0).at(0).value<RunStart>().run_id;
    QTRY_VERIFY_WITH_TIMEOUT(window.dashboard()->plots()->points(first) >= 5, 60000);
    QTest::mouseClick(window.dashboard()->findChild<QPushButton*>(QString("dashboard:stop:%1").arg(first)),
                      Qt::LeftButton);
    // The sweep goes on with the next trial.
    QTRY_COMPARE_WITH_TIMEOUT(started.count(), 2, 60000);
    QTRY_COMPARE(window.dashboard()->status_of(first), QString("stopped"));  // for good: a resume leaves it
    QCOMPARE(finished.count(), 0);
    const auto second = started.at(1).at(0).value<RunStart>().run_id;
    QTRY_VERIFY_WITH_TIMEOUT(window.dashboard()->plots()->points(second) >= 5, 60000);
    // From a terminal, `commtune-cli stop` stops the app's trial as its Stop button does.
    QProcess terminal;
    terminal.start(QFileInfo(qEnvironmentVariable("COMMTUNE_WORKER")).dir().filePath("commtune-cli"),
                   {"--db", store(), "stop", QString::number(second)});
    QVERIFY(terminal.waitForFinished(120000));
    QVERIFY2(terminal.exitCode() == 0, terminal.readAllStandardError().constData());
    QTRY_COMPARE_WITH_TIMEOUT(started.count(), 3, 60000);
    QTRY_COMPARE(window.dashboard()->status_of(second), QString("stopped"));
    const auto last = started.at(2).at(0).value<RunStart>().run_id;
    QTRY_VERIFY_WITH_TIMEOUT(window.dashboard()->plots()->points(last) >= 5, 60000);
    window.engine().stop_all();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
    commtune::db::Store s(store().toStdString(), commtune::db::Store::Access::ReadOnly);
    const auto sweep = s.sweeps().back();
    QCOMPARE(QString::fromStdString(sweep.status), QString("cancelled"));
    commtune::db::RunFilter filter;
    filter.sweep_id = sweep.id;
    std::map<std::string, int> statuses;
    for (const auto& r : s.runs(filter)) ++statuses[r.status];
    QCOMPARE(statuses["stopped"], 2);    // the trials stopped on their own
    QCOMPARE(statuses["cancelled"], 1);  // the one running at Stop all
    QVERIFY(!QFileInfo::exists(store() + ".stop/" + QString::number(second)));  // the request was taken
    std::int64_t cancelled_steps = 0;  // what the cancelled attempt stored
    for (const auto& r : s.runs(filter))
      if (r.status == "cancelled") cancelled_steps = s.steps_of_every_rank(r.id);

    // Resumed from the Analysis page: the cancelled trial goes on, the stopped ones stay stopped.
    auto* analysis = window.analysis();
    analysis->select_sweep(sweep.id);
    analysis->refresh();
    auto* resume = analysis->findChild<QPushButton*>("analysis:resume");
    QTRY_VERIFY(resume->isEnabled());
    QTest::mouseClick(resume, Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(started.count(), 4, 60000);
    const auto third = started.at(3).at(0).value<RunStart>().run_id;
    QCOMPARE(third, last);
    // On past where the cancelled attempt stopped: the resumed one has replaced those steps in the store.
    QTRY_VERIFY_WITH_TIMEOUT(
        commtune::db::Store(store().toStdString(), commtune::db::Store::Access::ReadOnly).steps_of_every_rank(third) >=
            cancelled_steps + 3,
        120000);
    window.engine().stop_all();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 60000);
    for (int i = 3; i < started.count(); ++i)
      for (const auto stopped : {first, second}) QVERIFY(started.at(i).at(0).value<RunStart>().run_id != stopped);
    commtune::db::Store after(store().toStdString(), commtune::db::Store::Access::ReadOnly);
    for (const auto stopped : {first, second})
      QCOMPARE(QString::fromStdString(after.run(stopped)->status), QString("stopped"));
    // The dashboard shows what the store holds: no point of the cancelled
    // attempt that the resumed one replaced (same step, another step time).
    for (int i = 1; i < started.count(); ++i) {
      const auto id = started.at(i).at(0).value<RunStart>().run_id;
      std::map<std::int64_t, double> stored;
      for (const auto& p : stored_points(id, after.steps(id))) stored[p.step] = p.step_s;
      for (const auto& p : window.dashboard()->plots()->points_of(id)) {
        if (!stored.count(p.step)) continue;  // a step some rank had not stored when it stopped
        QVERIFY2(std::abs(stored[p.step] - p.step_s) <= 1e-9 * std::abs(p.step_s),
                 qPrintable(QString("run %1 step %2: shown %3 s, stored %4 s")
                                .arg(id).arg(p.step).arg(p.step_s).arg(stored[p.step])));
      }
    }
  }

  void a_run_recorded_by_another_process_is_watched_live() {
    MainWindow window(store());
    window.show();
    window.show_page(MainWindow::kRuns);
    auto* runs = window.runs();
    QTRY_VERIFY(!runs->loading());
    const int before = runs->visible_runs();
    // The CLI records a run into the same store, as a user's terminal (or `import --follow`) would.
    const auto cli = QFileInfo(qEnvironmentVariable("COMMTUNE_WORKER")).dir().filePath("commtune-cli");
    QProcess other;
    other.start(cli, {"--db", store(), "run", "-q", "--summary", dir_.filePath("other.json"), "--name",
                      "from the terminal", "--set", "steps=4000", "--set", "world_size=2", "--set", "model.hidden=64",
                      "--set", "data.features=32"});
    QVERIFY(other.waitForStarted());
    // The list follows the store without a refresh: the run appears, running.
    QTRY_VERIFY_WITH_TIMEOUT(runs->visible_runs() == before + 1, 30000);
    std::int64_t run_id = 0;
    QTRY_VERIFY_WITH_TIMEOUT(
        [&] {
          commtune::db::Store s(store().toStdString(), commtune::db::Store::Access::ReadOnly);
          for (const auto& r : s.runs())
            if (r.name == "from the terminal" && r.status == "running") run_id = r.id;
          return run_id > 0;
        }(),
        30000);
    QTRY_VERIFY(!runs->loading());
    runs->open_runs({run_id});
    QTRY_VERIFY(runs->watch_button()->isEnabled());
    runs->watch_button()->click();
    QCOMPARE(window.findChild<QTabWidget*>("commtune:pages")->currentIndex(), int(MainWindow::kDashboard));
    auto* plots = window.dashboard()->plots();
    QTRY_VERIFY_WITH_TIMEOUT(plots->points(run_id) >= 5, 60000);
    const auto seen_while_running = plots->points(run_id);
    QVERIFY2(other.state() == QProcess::Running, "the run ended before the dashboard showed it live");
    // Watched, not owned: its Stop, not greyed, asks the recording process.
    auto* stop = window.dashboard()->findChild<QPushButton*>(QString("dashboard:stop:%1").arg(run_id));
    QVERIFY(stop && stop->isEnabled());
    QVERIFY(other.waitForFinished(300000));
    QCOMPARE(other.exitCode(), 0);
    QTRY_COMPARE_WITH_TIMEOUT(window.dashboard()->status_of(run_id), QString("succeeded"), 30000);
    QCOMPARE(plots->points(run_id), std::size_t{4000});
    QVERIFY(seen_while_running < 4000);

    // Its launch scripts from the export dialog.
    ExportDialog dialog(store(), run_id, runs->plots());
    QTRY_VERIFY(dialog.ready());
    dialog.set_folder(dir_.filePath("launch"));
    QSignalSpy written(&dialog, &ExportDialog::finished_writing);
    dialog.export_launch(3, 2, "10.0.0.1:29400");
    QTRY_COMPARE_WITH_TIMEOUT(written.count(), 1, 30000);
    QVERIFY2(written.at(0).at(1).toString().isEmpty(), qPrintable(written.at(0).at(1).toString()));
    QFile script(dir_.filePath("launch/launch_torchrun.sh"));
    QVERIFY(script.open(QIODevice::ReadOnly));
    const auto text = QString::fromUtf8(script.readAll());
    QVERIFY(text.contains("--nnodes 3 --nproc_per_node 2"));
    QVERIFY(text.contains("10.0.0.1:29400"));
    dialog.export_launch(2, 1, "no port here");
    QTRY_COMPARE_WITH_TIMEOUT(written.count(), 2, 30000);
    QVERIFY(written.at(1).at(1).toString().contains("rendezvous"));
  }

  // An unchecked box stands out from the window in either theme, by 15 or more in CIELAB lightness.
  void unchecked_boxes_show_in_both_themes() {
    MainWindow window(store());
    window.show();
    for (const auto theme : {ThemeChoice::Light, ThemeChoice::Dark}) {
      window.set_theme(theme);
      QCheckBox box("log");
      box.resize(box.sizeHint());
      const auto image = box.grab().toImage();
      QStyleOptionButton option;
      option.initFrom(&box);
      const auto indicator = box.style()->subElementRect(QStyle::SE_CheckBoxIndicator, &option, &box);
      const double window_lightness = lab(box.palette().color(QPalette::Window))[0];
      double most = 0;  // the indicator's pixel farthest in lightness from the window
      for (int x = indicator.left(); x <= indicator.right(); ++x)
        for (int y = indicator.top(); y <= indicator.bottom(); ++y)
          most = std::max(most, std::abs(lab(image.pixelColor(x, y))[0] - window_lightness));
      // The light theme's Fusion box: 18 apart; the dark one's was 6.8.
      QVERIFY2(most >= 15, qPrintable(QString("the %1 theme's unchecked box differs by %2 in lightness")
                                          .arg(theme == ThemeChoice::Dark ? "dark" : "light")
                                          .arg(most, 0, 'f', 1)));
    }
    window.set_theme(ThemeChoice::System);
  }

  void themes_and_layout_are_remembered() {
    {
      MainWindow window(store());
      window.show();
      window.set_theme(ThemeChoice::Dark);
      QVERIFY(plot_lightness(window.dashboard()->plots()->loss_plot()) < 0.5);
      window.set_theme(ThemeChoice::Light);
      QVERIFY(plot_lightness(window.dashboard()->plots()->loss_plot()) > 0.5);
      window.set_theme(ThemeChoice::Dark);
      window.launch()->form()->set_text("steps", "77");
      window.analysis()->tolerance()->setValue(2.5);
      window.show_page(MainWindow::kRuns);
      window.resize(1000, 700);
      window.close();
    }
    MainWindow again(store());
    QCOMPARE(again.launch()->form()->field("steps")->text(), QString("77"));
    QCOMPARE(again.analysis()->tolerance()->value(), 2.5);  // the verdicts' loss tolerance too
    for (const char* edited : {"abc", "nan", "1e9", "-3"}) {  // a settings file edited by hand: recommend's 1%
      QSettings().setValue("analysis/tolerance_percent", edited);
      MainWindow fresh(store());
      QCOMPARE(fresh.analysis()->tolerance()->value(), 1.0);
    }
    QCOMPARE(again.findChild<QTabWidget*>("commtune:pages")->currentIndex(), int(MainWindow::kRuns));
    QVERIFY(plot_lightness(again.dashboard()->plots()->loss_plot()) < 0.5);
    again.set_theme(ThemeChoice::System);
    QSettings().clear();
  }
};

QTEST_MAIN(GuiTest)
#include "gui_test.moc"
