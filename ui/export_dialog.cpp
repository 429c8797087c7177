#include "ui/export_dialog.h"

#include <QApplication>
#include <QBuffer>
#include <QCheckBox>
#include <QClipboard>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPageSize>
#include <QPdfWriter>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QSvgGenerator>
#include <QVBoxLayout>
#include "ui/plot/qcustomplot.h"

#include "core/tuner/export/launch_scripts.h"
#include "core/tuner/export/production_export.h"
#include "core/tuner/export/run_source.h"
#include "core/tuner/io/output_file.h"
#include "core/tuner/store/run_label.h"
#include "db/store.h"
#include "ui/async.h"
#include "ui/plot/run_plots.h"

namespace commtune::ui {

bool save_plot(QCustomPlot* plot, const QString& path, const QString& format) {
  // Drawn into memory, then written whole (core/tuner/io/output_file.h): a symlink
  // at `path` is replaced, never written through.
  const int w = std::max(plot->width(), 640), h = std::max(plot->height(), 400);
  QBuffer bytes;
  bytes.open(QIODevice::WriteOnly);
  const auto draw_on = [&](QPaintDevice* device) {
    QCPPainter painter;
    if (!painter.begin(device)) return false;
    painter.setMode(QCPPainter::pmVectorized);
    plot->toPainter(&painter, w, h);
    return painter.end();
  };
  bool drawn = false;
  if (format == "png") {
    drawn = plot->toPixmap(w, h, 2.0).save(&bytes, "PNG");
  } else if (format == "pdf") {
    QPdfWriter pdf(&bytes);
    pdf.setResolution(72);
    pdf.setPageSize(QPageSize(QSizeF(w, h), QPageSize::Point));
    pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
    pdf.setTitle(plot->objectName());
    drawn = draw_on(&pdf);
  } else {
    QSvgGenerator svg;
    svg.setOutputDevice(&bytes);
    svg.setSize(QSize(w, h));
    svg.setViewBox(QRect(0, 0, w, h));
    svg.setTitle(plot->objectName());
    drawn = draw_on(&svg);
  }
  if (!drawn) return false;
  try {
    write_file_whole(path.toStdString(), bytes.data().toStdString());
    return true;
  } catch (const std::runtime_error&) {
    return false;
  }
}

ExportDialog::ExportDialog(QString store_path, std::int64_t run_id, RunPlots* plots, QWidget* parent)
    : QDialog(parent), store_path_(std::move(store_path)), run_id_(run_id), plots_(plots) {
  setObjectName("export:dialog");
  setWindowTitle(QString("Export run %1").arg(run_id));
  title_ = new QLabel(QString("Run %1").arg(run_id), this);
  folder_ = new QLineEdit(QDir::home().filePath(QString("commtune-export/run-%1").arg(run_id)), this);
  folder_->setObjectName("export:folder");
  auto* browse = new QPushButton("Browse…", this);
  connect(browse, &QPushButton::clicked, this, [this] {
    const auto dir = QFileDialog::getExistingDirectory(this, "Export to", folder_->text());
    if (!dir.isEmpty()) folder_->setText(dir);
  });
  runtime_state_ = new QCheckBox("with runtime state from the run's last checkpoint", this);
  runtime_state_->setEnabled(false);
  runtime_state_->setToolTip("Stateful hooks (PowerSGD) continue where the run stopped: per-rank state files");

  production_ = new QPushButton("Export for production", this);
  production_->setObjectName("export:production");
  production_->setEnabled(false);
  production_->setToolTip(
      "PowerSGDState file, hook registration or BytePS parameters, the configuration and a Python snippet");
  auto* copy_snippet = new QPushButton("Copy snippet", this);
  auto* copy_config = new QPushButton("Copy configuration (JSON)", this);
  connect(production_, &QPushButton::clicked, this, &ExportDialog::export_production);
  connect(copy_snippet, &QPushButton::clicked, this, [this] { QApplication::clipboard()->setText(snippet()); });
  connect(copy_config, &QPushButton::clicked, this,
          [this] { QApplication::clipboard()->setText(QString::fromStdString(config_.dump(2))); });
  snippet_ = new QPlainTextEdit(this);
  snippet_->setObjectName("export:snippet");
  snippet_->setReadOnly(true);
  snippet_->setPlaceholderText("The Python that uses the export appears here.");
  snippet_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));

  nodes_ = new QSpinBox(this);
  nodes_->setRange(1, 65536);
  nodes_->setValue(2);
  ranks_per_node_ = new QSpinBox(this);
  ranks_per_node_->setRange(1, 1024);
  ranks_per_node_->setValue(1);
  ranks_per_node_->setToolTip("One per GPU on GPU nodes");
  rendezvous_ = new QLineEdit(LaunchPlan{}.rendezvous.c_str(), this);
  rendezvous_->setToolTip("torchrun's rendezvous HOST:PORT: a node every node reaches");
  launch_ = new QPushButton("Write launch scripts", this);
  launch_->setObjectName("export:launch");
  launch_->setEnabled(false);
  launch_->setToolTip("run.json, launch_torchrun.sh (run on every node) and launch.sbatch (SLURM); follow the job "
                      "with: commtune-cli import --follow FOLDER/events");
  connect(launch_, &QPushButton::clicked, this,
          [this] { export_launch(nodes_->value(), ranks_per_node_->value(), rendezvous_->text()); });

  plot_format_ = new QComboBox(this);
  plot_format_->addItems({"png", "svg", "pdf"});
  auto* save_plots_button = new QPushButton("Save plots", this);
  auto* save_csv_button = new QPushButton("Save data as CSV", this);
  connect(save_plots_button, &QPushButton::clicked, this, [this] { save_plots(plot_format_->currentText()); });
  connect(save_csv_button, &QPushButton::clicked, this, &ExportDialog::save_csv);

  status_ = new QLabel(this);
  status_->setObjectName("export:status");
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* where = new QHBoxLayout;
  where->addWidget(folder_, 1);
  where->addWidget(browse);
  auto* production_box = new QGroupBox("Production", this);
  auto* production_layout = new QVBoxLayout(production_box);
  production_layout->addWidget(runtime_state_);
  auto* production_buttons = new QHBoxLayout;
  production_buttons->addWidget(production_);
  production_buttons->addWidget(copy_snippet);
  production_buttons->addWidget(copy_config);
  production_buttons->addStretch();
  production_layout->addLayout(production_buttons);
  production_layout->addWidget(snippet_, 1);
  auto* launch_box = new QGroupBox("Several nodes", this);
  auto* launch_layout = new QHBoxLayout(launch_box);
  launch_layout->addWidget(new QLabel("nodes", this));
  launch_layout->addWidget(nodes_);
  launch_layout->addWidget(new QLabel("ranks per node", this));
  launch_layout->addWidget(ranks_per_node_);
  launch_layout->addWidget(new QLabel("rendezvous", this));
  launch_layout->addWidget(rendezvous_, 1);
  launch_layout->addWidget(launch_);
  auto* data_box = new QGroupBox("Plots and data (the runs shown under Runs)", this);
  auto* data_layout = new QHBoxLayout(data_box);
  data_layout->addWidget(plot_format_);
  data_layout->addWidget(save_plots_button);
  data_layout->addWidget(save_csv_button);
  data_layout->addStretch();
  auto* close = new QPushButton("Close", this);
  connect(close, &QPushButton::clicked, this, &QDialog::accept);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(title_);
  auto* form = new QFormLayout;
  form->addRow("Folder", where);
  layout->addLayout(form);
  layout->addWidget(production_box, 1);
  layout->addWidget(launch_box);
  layout->addWidget(data_box);
  layout->addWidget(status_);
  layout->addWidget(close, 0, Qt::AlignRight);
  resize(720, 560);

  struct Source {
    nlohmann::json config;
    QString checkpoint, title;
  };
  run_async(
      this,
      [path = store_path_.toStdString(), run_id] {
        const db::Store store(path, db::Store::Access::ReadOnly);
        const auto stored = run_export_source(store, run_id);  // as `export --run`: a refused configuration stops here
        return Source{stored.config, QString::fromStdString(stored.checkpoint),
                      QString("Run %1 %2: %3, %4")
                          .arg(run_id)
                          .arg(QString::fromStdString(stored.run.name))
                          .arg(QString::fromStdString(describe_hook(stored.run)))
                          .arg(QString::fromStdString(stored.run.status))};
      },
      [this](const Outcome<Source>& out) {
        if (!out.value) return report({}, out.error);
        config_ = out.value->config;
        checkpoint_ = out.value->checkpoint;
        title_->setText(out.value->title);
        runtime_state_->setEnabled(!checkpoint_.isEmpty());
        production_->setEnabled(true);
        launch_->setEnabled(true);
        Q_EMIT loaded();
      });
}

void ExportDialog::set_folder(const QString& folder) { folder_->setText(folder); }
QString ExportDialog::snippet() const { return snippet_->toPlainText(); }
QString ExportDialog::status() const { return status_->text(); }

void ExportDialog::report(const QStringList& files, const QString& error) {
  status_->setStyleSheet(error.isEmpty() ? QString() : "color: #d9534f;");
  status_->setText(error.isEmpty() ? "Wrote " + files.join(", ") : error);
  Q_EMIT finished_writing(files, error);
}

void ExportDialog::export_production() {
  const auto folder = folder_->text().toStdString();
  const auto checkpoint = runtime_state_->isChecked() ? checkpoint_.toStdString() : std::string();
  run_async(
      this,
      [config = config_, folder, checkpoint] {
        QStringList written;
        for (const auto& f : export_for_production(config, checkpoint, folder)) written << QString::fromStdString(f);
        return written;
      },
      [this](const Outcome<QStringList>& out) {
        if (!out.value) return report({}, out.error);
        for (const auto& f : *out.value)
          if (f.endsWith(".py")) {
            QFile file(f);
            if (file.open(QIODevice::ReadOnly)) snippet_->setPlainText(QString::fromUtf8(file.readAll()));
          }
        report(*out.value, {});
      });
}

void ExportDialog::export_launch(int nodes, int ranks_per_node, const QString& rendezvous) {
  LaunchPlan plan;
  plan.nodes = nodes;
  plan.ranks_per_node = ranks_per_node;
  plan.rendezvous = rendezvous.trimmed().toStdString();
  plan.name = "commtune-run-" + std::to_string(run_id_);
  run_async(
      this,
      [config = config_, plan, folder = folder_->text().toStdString()] {
        QStringList written;
        for (const auto& f : write_launch_scripts(config, plan, folder)) written << QString::fromStdString(f);
        return written;
      },
      [this](const Outcome<QStringList>& out) {
        if (!out.value) return report({}, out.error);
        snippet_->setPlainText(QString("# on every node:\nsh %1/launch_torchrun.sh\n# or: sbatch %1/launch.sbatch\n"
                                       "# then, to watch it here (Runs > Watch live):\n"
                                       "commtune-cli import --follow %1/events\n")
                                   .arg(folder_->text()));
        report(*out.value, {});
      });
}

void ExportDialog::save_plots(const QString& format) {
  QDir().mkpath(folder_->text());
  QStringList written;
  for (const auto& [name, plot] : plots_->plots()) {
    const auto path = QDir(folder_->text()).filePath(name + "." + format);
    if (!save_plot(plot, path, format)) return report(written, "could not write " + path);
    written << path;
  }
  report(written, {});
}

void ExportDialog::save_csv() {
  QDir().mkpath(folder_->text());
  const auto path = QDir(folder_->text()).filePath("curves.csv");
  try {
    write_file_whole(path.toStdString(), plots_->csv().toStdString());
  } catch (const std::runtime_error& e) {
    return report({}, QString::fromStdString(e.what()));
  }
  report({path}, {});
}

}  // namespace commtune::ui
