#include "ui/pages/analysis/importance_view.h"

#include <QLabel>
#include <QFont>
#include <QFontMetrics>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "ui/forms/param_field.h"
#include "ui/plot/qcustomplot.h"
#include "ui/plot/plot_style.h"
#include "ui/theme.h"

namespace commtune::ui {

void ImportanceView::draw(const ImportanceResult& importance) {
  plot_->clearPlottables();
  plot_->clearItems();
  const Theme t = current_theme();
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  auto* bars = new QCPBars(plot_->xAxis, plot_->yAxis);
  bars->setPen(QPen(t.series_color(0)));
  bars->setBrush(t.series_color(0));
  bars->setWidth(0.6);
  shares_ = importance.shares;
  const auto& shares = shares_;
  for (std::size_t i = 0; i < shares.size(); ++i) {
    const auto& imp = shares[i];
    ticker->addTick(static_cast<double>(i), QString::fromStdString(imp.param));
    bars->addData(static_cast<double>(i), imp.share);
    auto* value = new QCPItemText(plot_);
    value->position->setCoords(static_cast<double>(i), imp.share);
    value->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
    value->setText(imp.kind == Importance::Kind::Parameter
                       ? QString("%1% (%2 values)").arg(100 * imp.share, 0, 'f', 1).arg(imp.groups)
                       : QString("%1%").arg(100 * imp.share, 0, 'f', 1));
    value->setColor(t.foreground);
  }
  note_->setText(
      QString::fromStdString(importance.method) +
      (shares.empty() ? QString() : " The shares add up to 100% of the tail loss's variance; allreduce baselines and "
                                    "diverged trials are left out."));
  plot_->xAxis->setTicker(ticker);
  plot_->xAxis->setRange(-0.6, std::max<double>(1, static_cast<double>(shares.size())) - 0.4);
  plot_->xAxis->setLabel(shares.empty() ? "needs a sweep with 3 or more finished trials" : "");
  plot_->replot();
}

std::optional<PlotHit> ImportanceView::hit(const QPointF& pixel) const {
  const auto& shares = shares_;
  const double x = plot_->xAxis->pixelToCoord(pixel.x());
  const double index = std::round(x);
  if (std::abs(x - index) > 0.3 || index < 0 || index >= static_cast<double>(shares.size())) return std::nullopt;
  const auto& imp = shares[static_cast<std::size_t>(index)];
  // Anywhere in the bar's column up to its top, so a thin bar can still be read.
  const double y = plot_->yAxis->pixelToCoord(pixel.y());
  if (y < plot_->yAxis->range().lower || y > std::max(imp.share, 0.05 * plot_->yAxis->range().size()))
    return std::nullopt;
  const auto share = QString::number(100 * imp.share, 'f', 1);
  switch (imp.kind) {
    case Importance::Kind::Parameter:
      return PlotHit{QString("%1: %2% of the tail loss's variance, between its %3 values")
                         .arg(QString::fromStdString(imp.param), share)
                         .arg(imp.groups),
                     {}};
    case Importance::Kind::Interactions:
      return PlotHit{QString("interactions: %1% of the tail loss's variance, from parameters varying together")
                         .arg(share),
                     {}};
    case Importance::Kind::Noise:
      break;
  }
  return PlotHit{QString("noise: %1% of the tail loss's variance, between repeats of one configuration").arg(share),
                 {}};
}

}  // namespace commtune::ui
