# Third-party libraries. On Debian they come from the packages that
# scripts/setup-deps.sh installs. Where no package manager reaches (the lent
# GPU machines), the header-only ones are found in COMMTUNE_EXTRA_INCLUDE_DIRS,
# and SQLite's library in the lib/ folder beside it, which
# scripts/gpu-deps.sh fills from a Debian machine.
set(COMMTUNE_EXTRA_INCLUDE_DIRS "" CACHE PATH "Extra folders to find third-party headers in")

find_package(nlohmann_json 3.10 QUIET)
if(NOT TARGET nlohmann_json::nlohmann_json)
  find_path(COMMTUNE_JSON_INCLUDE nlohmann/json.hpp HINTS ${COMMTUNE_EXTRA_INCLUDE_DIRS} REQUIRED)
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  target_include_directories(nlohmann_json::nlohmann_json SYSTEM INTERFACE ${COMMTUNE_JSON_INCLUDE})
endif()

find_package(CLI11 QUIET)
if(NOT TARGET CLI11::CLI11)
  find_path(COMMTUNE_CLI11_INCLUDE CLI/CLI.hpp HINTS ${COMMTUNE_EXTRA_INCLUDE_DIRS} REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 SYSTEM INTERFACE ${COMMTUNE_CLI11_INCLUDE})
endif()

find_path(ZLIB_INCLUDE_DIR zlib.h HINTS ${COMMTUNE_EXTRA_INCLUDE_DIRS})
find_library(ZLIB_LIBRARY NAMES z libz.so.1)
find_package(ZLIB REQUIRED)
find_package(Threads REQUIRED)

find_path(SQLite3_INCLUDE_DIR sqlite3.h HINTS ${COMMTUNE_EXTRA_INCLUDE_DIRS})
set(commtune_extra_lib_dirs "")
foreach(dir IN LISTS COMMTUNE_EXTRA_INCLUDE_DIRS)
  list(APPEND commtune_extra_lib_dirs ${dir}/../lib)
endforeach()
find_library(SQLite3_LIBRARY NAMES sqlite3 libsqlite3.so.0 HINTS ${commtune_extra_lib_dirs})
find_package(SQLite3 REQUIRED)

# The heap of the programs that read whole stores (the CLI, the desktop app,
# bench/analysis_bench): mimalloc where it is installed. Reading 10^5 runs
# allocates and frees tens of millions of small blocks (configuration trees);
# with mimalloc `recommend --sweep` at 10^5 stored trials took 6.1 s instead
# of 9.3 s with glibc's malloc (bench/RESULTS.md, "Big sweeps", session 17).
# Without it (the lent GPU machines) glibc's is tuned instead (app/heap_tuning.h).
option(COMMTUNE_MIMALLOC "Allocate with mimalloc in the CLI and the desktop app, where it is installed" ON)
if(COMMTUNE_MIMALLOC)
  find_package(mimalloc 2.0 CONFIG QUIET)
endif()
add_library(commtune_heap INTERFACE)
add_library(commtune::heap ALIAS commtune_heap)
if(COMMTUNE_MIMALLOC AND TARGET mimalloc)
  # Needed even though nothing names it, so that it comes before libc in
  # the search order and stands in for malloc in the whole process
  # (libtorch's and Qt's allocations too), not only ours.
  target_link_libraries(commtune_heap INTERFACE -Wl,--push-state,--no-as-needed mimalloc -Wl,--pop-state)
  message(STATUS "commtune: the CLI and the desktop app allocate with mimalloc ${mimalloc_VERSION}")
elseif(COMMTUNE_MIMALLOC)
  message(STATUS "commtune: no mimalloc (libmimalloc-dev): the CLI and the desktop app use glibc's malloc, tuned")
else()
  message(STATUS "commtune: COMMTUNE_MIMALLOC=OFF: the CLI and the desktop app use glibc's malloc, tuned")
endif()
