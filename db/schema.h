// The run store's schema: an application id that marks the file as
// commtune's, a version in PRAGMA user_version, and forward migrations, one
// transaction each. docs/store.md describes the tables.
#pragma once

#include <cstdint>
#include <string>

#include "db/sqlite.h"

namespace commtune::db {

inline constexpr std::int32_t kApplicationId = 0x436d5475;  // "CmTu"
inline constexpr int kSchemaVersion = 6;

// Brings a read-write connection's file to kSchemaVersion (creating the
// schema in an empty file, migrating an older one). Throws Error for a
// foreign, newer or damaged file, which it leaves untouched.
void migrate(Connection& connection, int target_version = kSchemaVersion);

// The oldest version a read-only connection reads as it is: versions 5 and 6
// only added stamps (db/config_check.h) and step profiles (RunEnd::samples),
// and a version 4 store on a read-only share reads as one whose runs carry
// neither.
inline constexpr int kOldestReadableVersion = 4;

// Checks that a read-only connection's file is a commtune store this build
// reads (kOldestReadableVersion .. kSchemaVersion); returns its version.
int check_readable(const Connection& connection);

// The SQL that fills run_params (typed parameter rows) from runs.config: the
// migration that introduced the table and every new run use this one
// statement. `source` is a query yielding the runs' (id, config).
std::string fill_run_params_sql(const std::string& source);

}  // namespace commtune::db
