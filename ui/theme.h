// Light and dark looks for the whole app, and the colours plots draw with.
// "System" follows the desktop's palette (and its changes).
#pragma once

#include <QColor>
#include <QString>
#include <vector>

class QApplication;

namespace commtune::ui {

enum class ThemeChoice { System, Light, Dark };

struct Theme {
  bool dark = false;
  QColor background, foreground, grid, muted;
  // Distinct series colours, readable on `background`.
  std::vector<QColor> series;
  QColor series_color(std::size_t index) const { return series[index % series.size()]; }
};

// Applies the choice to the application (style and palette) and returns the
// resulting plot colours.
Theme apply_theme(QApplication& app, ThemeChoice choice);
// The plot colours for the application's current palette.
Theme current_theme();

QString to_string(ThemeChoice choice);
ThemeChoice theme_from_string(const QString& text);

}  // namespace commtune::ui
