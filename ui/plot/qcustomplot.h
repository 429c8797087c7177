// QCustomPlot's header with the Qt keywords it uses (signals, slots,
// foreach) spelled as macros for just this include: commtune builds Qt code
// with QT_NO_KEYWORDS, because libtorch's headers use `slots` as a name.
#pragma once

#define signals Q_SIGNALS
#define slots Q_SLOTS
#define emit Q_EMIT
#define foreach Q_FOREACH
#include <qcustomplot.h>
#undef signals
#undef slots
#undef emit
#undef foreach
