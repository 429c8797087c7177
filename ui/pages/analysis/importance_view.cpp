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

const ParamCorrelation* ImportanceView::correlation_of(const std::string& param) const {
  for (const auto& c : correlations_)
    if (c.param == param) return &c;
  return nullptr;
}

void ImportanceView::draw(const ImportanceResult& importance, const std::vector<ParamCorrelation>& correlations) {
  correlations_ = correlations;
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
    // The sign of its effect beside its name: which way to move it.
    const auto* c = imp.kind == Importance::Kind::Parameter ? correlation_of(imp.param) : nullptr;
    const auto sign = c ? QString::fromStdString(c->sign()) : QString();
    ticker->addTick(static_cast<double>(i), QString::fromStdString(imp.param) + (sign.isEmpty() ? "" : " (" + sign + ")"));
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
      (shares.empty() ? QString()
                      : " The shares add up to 100% of the tail loss's variance; allreduce baselines and diverged "
                        "trials are left out. Beside a number's name, the sign of its effect: (+) the tail loss "
                        "rises with it, (−) it falls (Spearman's rank correlation over the trials)."));
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
    {
      QString effect;
      if (const auto* c = correlation_of(imp.param); c && c->rho)
        effect = QString("; the tail loss %1 as it rises (Spearman's rank correlation %2 over %3 trials)")
                     .arg(*c->rho > 0 ? "rises" : "falls")
                     .arg(*c->rho, 0, 'f', 2)
                     .arg(c->trials);
      return PlotHit{QString("%1: %2% of the tail loss's variance, between its %3 values%4")
                         .arg(QString::fromStdString(imp.param), share)
                         .arg(imp.groups)
                         .arg(effect),
                     {}};
    }
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
