# Qt 6 and QCustomPlot for the desktop app (ui/, app/commtune). Machines
# without them (the lent GPU machines) build the headless targets only.
# Sets COMMTUNE_WITH_GUI.
set(COMMTUNE_WITH_GUI OFF)
if(NOT COMMTUNE_GUI STREQUAL "OFF")
  set(_qt_required "")
  if(COMMTUNE_GUI STREQUAL "ON")
    set(_qt_required REQUIRED)
  endif()
  # QCustomPlot's package config expects Qt's PrintSupport to be found first.
  find_package(Qt6 6.2 COMPONENTS Widgets PrintSupport Svg Concurrent Test ${_qt_required})
  if(Qt6_FOUND)
    find_package(QCustomPlotQt6 ${_qt_required})
  endif()
  if(Qt6_FOUND AND QCustomPlotQt6_FOUND)
    set(COMMTUNE_WITH_GUI ON)
  else()
    message(STATUS "Qt 6 or QCustomPlot not found: building without the desktop app")
  endif()
endif()
