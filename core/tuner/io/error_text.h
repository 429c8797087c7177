// Errors from libtorch and the TorchScript interpreter as the one line a
// user reads: they come with tracebacks, suggestions and leading newlines.
#pragma once

#include <string>

namespace commtune {

// The last "RuntimeError: " line's text (the TorchScript interpreter puts
// the failing line of the model's code before the error itself), else the
// first line that is not blank, without its indentation, or the source
// location libtorch's checks put first ("[enforce fail at FILE:LINE] . ").
std::string one_line_error(const std::string& text);

// "" unless `text` is the TorchScript interpreter's traceback of an
// exception the model's own code raised (`raise ValueError("...")` in its
// forward); else that exception in one line with where the model's source
// raised it: "boom (RuntimeError raised at model.py, line 8, in forward)".
std::string raised_by_model(const std::string& text);

}  // namespace commtune
