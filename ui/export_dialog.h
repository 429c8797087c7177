// Export of a stored run: the production form of its configuration
// (PowerSGDState file, hook registration or BytePS parameters, with a Python
// snippet to paste and copy), scripts that launch it on several nodes
// (torchrun, SLURM), its plots as PNG, SVG or PDF, and its curves as CSV.
// Files are written off the UI thread.
#pragma once

#include <QDialog>
#include <QStringList>
#include <cstdint>
#include <nlohmann/json.hpp>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QSpinBox;
class QPushButton;
class QCustomPlot;

namespace commtune::ui {

class RunPlots;

class ExportDialog : public QDialog {
  Q_OBJECT
 public:
  ExportDialog(QString store_path, std::int64_t run_id, RunPlots* plots, QWidget* parent = nullptr);

  void set_folder(const QString& folder);
  void export_production();                // result: finished() with the files
  // torchrun and sbatch scripts for nodes x ranks_per_node ranks (result: finished()).
  void export_launch(int nodes, int ranks_per_node, const QString& rendezvous);
  void save_plots(const QString& format);  // png, svg or pdf
  void save_csv();
  QString snippet() const;
  QString status() const;
  bool ready() const { return !config_.is_null(); }

 Q_SIGNALS:
  void loaded();
  void finished_writing(const QStringList& files, const QString& error);

 private:
  void report(const QStringList& files, const QString& error);

  QString store_path_;
  std::int64_t run_id_;
  RunPlots* plots_;
  nlohmann::json config_;
  QString checkpoint_;
  QLabel* title_;
  QLineEdit* folder_;
  QCheckBox* runtime_state_;
  QComboBox* plot_format_;
  QPlainTextEdit* snippet_;
  QLabel* status_;
  QPushButton* production_;
  QSpinBox* nodes_;
  QSpinBox* ranks_per_node_;
  QLineEdit* rendezvous_;
  QPushButton* launch_;
};

// Writes one plot to `path` as png, svg or pdf (by `format`).
bool save_plot(QCustomPlot* plot, const QString& path, const QString& format);

}  // namespace commtune::ui
