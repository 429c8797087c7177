// The desktop app driven as a user would, on the real window (offscreen, or
// under Xvfb): forms from the schema with inline validation, a 2-rank CPU
// run launched from the form whose points reach the plots, stopped from the
// dashboard, found in the run browser and exported as a PowerSGDState file
// that PyTorch loads; a sweep from the form, its analysis, themes and the
// remembered layout; a plugin's hook and compressor in the forms.
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileInfo>
#include <QLineEdit>
#include <QProcess>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "core/netmodel/network.h"
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
#include "ui/plot/qcustomplot.h"
#include "ui/plot/run_plots.h"

using namespace commtune::ui;

namespace {

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
    QCOMPARE(launch->sweep()->trials(), 10);
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
    QVERIFY2(tpe->sweep()->problem().isEmpty(), qPrintable(tpe->sweep()->problem()));
    QCOMPARE(tpe->sweep()->trials(), 13);
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
    QVERIFY(plots->loss_plot()->graph(0)->dataCount() >= 20);
    QVERIFY(std::isfinite(plots->loss_plot()->graph(0)->data()->at(0)->value));

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
    QTRY_VERIFY_WITH_TIMEOUT(analysed.count() >= 1 && analysis->data().points.size() == 5, 60000);
    QCOMPARE(analysis->data().axes.size(), std::size_t{2});
    QCOMPARE(static_cast<std::size_t>(analysis->what_if_table()->rowCount()), commtune::net::link_presets().size());
    int baselines = 0;
    for (const auto& p : analysis->data().points) {
      baselines += p.baseline;
      QVERIFY(p.predicted_ms && *p.predicted_ms > 0);
      if (!p.baseline) QCOMPARE(p.axis_values.size(), std::size_t{2});
    }
    QCOMPARE(baselines, 1);

    // A faster target device: the predictions shrink and every verdict says which compute it assumed.
    std::map<std::int64_t, double> here;
    for (const auto& p : analysis->data().points) here[p.run_id] = *p.predicted_ms;
    QVERIFY(analysis->data().what_if.front().verdict.contains("as measured"));
    const int before = analysed.count();
    analysis->findChild<QDoubleSpinBox*>("analysis:compute_scale")->setValue(0.01);
    QTRY_VERIFY_WITH_TIMEOUT(analysed.count() > before && analysis->data().points.size() == 5, 60000);
    for (const auto& p : analysis->data().points) QVERIFY(*p.predicted_ms < here[p.run_id]);
    for (const auto& row : analysis->data().what_if) QVERIFY2(row.verdict.contains("x 0.01"), qPrintable(row.verdict));
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
    window.engine().stop_all();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
    commtune::db::Store s(store().toStdString(), commtune::db::Store::Access::ReadOnly);
    const auto sweep = s.sweeps().back();
    QCOMPARE(QString::fromStdString(sweep.status), QString("cancelled"));
    commtune::db::RunFilter filter;
    filter.sweep_id = sweep.id;
    std::map<std::string, int> statuses;
    for (const auto& r : s.runs(filter)) ++statuses[r.status];
    QCOMPARE(statuses["stopped"], 1);    // the trial stopped on its own
    QCOMPARE(statuses["cancelled"], 1);  // the one running at Stop all
    QCOMPARE(statuses["pending"], 1);    // never started

    // Resumed from the Analysis page: the cancelled trial goes on, the stopped one stays stopped.
    auto* analysis = window.analysis();
    analysis->select_sweep(sweep.id);
    analysis->refresh();
    auto* resume = analysis->findChild<QPushButton*>("analysis:resume");
    QTRY_VERIFY(resume->isEnabled());
    QTest::mouseClick(resume, Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(started.count(), 3, 60000);
    const auto third = started.at(2).at(0).value<RunStart>().run_id;
    QVERIFY(third != first);
    QTRY_VERIFY_WITH_TIMEOUT(window.dashboard()->plots()->points(third) >= 3, 60000);
    window.engine().stop_all();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 60000);
    for (int i = 2; i < started.count(); ++i) QVERIFY(started.at(i).at(0).value<RunStart>().run_id != first);
    commtune::db::Store after(store().toStdString(), commtune::db::Store::Access::ReadOnly);
    QCOMPARE(QString::fromStdString(after.run(first)->status), QString("stopped"));
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
      window.show_page(MainWindow::kRuns);
      window.resize(1000, 700);
      window.close();
    }
    MainWindow again(store());
    QCOMPARE(again.launch()->form()->field("steps")->text(), QString("77"));
    QCOMPARE(again.findChild<QTabWidget*>("commtune:pages")->currentIndex(), int(MainWindow::kRuns));
    QVERIFY(plot_lightness(again.dashboard()->plots()->loss_plot()) < 0.5);
    again.set_theme(ThemeChoice::System);
    QSettings().clear();
  }
};

QTEST_MAIN(GuiTest)
#include "gui_test.moc"
