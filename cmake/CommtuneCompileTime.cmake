# What keeps the build short on two cores.
#
# Unity builds: each target's sources compile in batches of 8 per
# translation unit, so the templates they share (json, CLI11, ATen's
# inline code) are instantiated and optimised once per batch instead of once
# per file: commtune-cli's 9 files took 100 s of compiler time one by one,
# 28 s as one unit. Sources with options of their own (the vectorised
# kernels) stay on their own. COMMTUNE_UNITY_BUILD=OFF compiles file by file.
option(COMMTUNE_UNITY_BUILD "Compile each target's sources in batches of 8" ON)
if(COMMTUNE_UNITY_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 8)
endif()

# An executable is not relinked when only a shared library it links changed
# (libcommtune_engine.so after an edit in core/engine/): it loads the new one at start.
set(CMAKE_LINK_DEPENDS_NO_SHARED ON)

# Precompiled headers. ATen's headers (and Qt's, and nlohmann's json) are
# most of what a translation unit costs to compile here: 17.7 s for
# core/engine/hooks/powersgd.cpp, 7.8 s with them precompiled (measured on 2 cores,
# GCC 12). A precompiled header is only used by compiles with the same code
# model, so the library (-fPIC) and the executables (-fPIE) each build one:
# commtune_engine and commtune-worker own theirs, the other torch targets reuse
# the one of their kind; the desktop app's library has one with Qt's.
#
# COMMTUNE_PCH=OFF COMMTUNE_UNITY_BUILD=OFF builds without either (to check
# that every file includes what it uses).
option(COMMTUNE_PCH "Precompile the libtorch, Qt and json headers" ON)

set(COMMTUNE_TORCH_PCH_HEADERS
    <ATen/ATen.h> <ATen/core/Dict.h> <ATen/core/ivalue.h> <nlohmann/json.hpp>
    <algorithm> <functional> <map> <memory> <optional> <string> <vector>)

# commtune_torch_pch(TARGET [REUSE_FROM OWNER]): precompile the torch headers
# for TARGET, or take OWNER's (same code model: both libraries or both executables).
function(commtune_torch_pch target)
  cmake_parse_arguments(PCH "" "REUSE_FROM" "" ${ARGN})
  if(NOT COMMTUNE_PCH)
    return()
  endif()
  if(PCH_REUSE_FROM)
    target_precompile_headers(${target} REUSE_FROM ${PCH_REUSE_FROM})
  else()
    target_precompile_headers(${target} PRIVATE ${COMMTUNE_TORCH_PCH_HEADERS})
  endif()
endfunction()

# The desktop app: Qt's widgets and QCustomPlot (its pages include no torch header).
function(commtune_qt_pch target)
  if(COMMTUNE_PCH)
    target_precompile_headers(${target} PRIVATE
      "${PROJECT_SOURCE_DIR}/ui/plot/qcustomplot.h" <QtWidgets/QtWidgets> <nlohmann/json.hpp>
      <functional> <map> <memory> <string> <vector>)
  endif()
endfunction()
