// libtorch's and the TorchScript interpreter's errors as the one line a user reads.
#include <gtest/gtest.h>

#include "core/tuner/io/error_text.h"

using commtune::one_line_error;

TEST(ErrorText, ATorchScriptTracebackIsItsRuntimeError) {
  const std::string traceback =
      "The following operation failed in the TorchScript interpreter.\n"
      "Traceback of TorchScript, serialized code (most recent call last):\n"
      "  File \"code/__torch__/torch/nn/modules/linear.py\", line 12, in forward\n"
      "    return torch.linear(input, weight, bias)\n"
      "RuntimeError: mat1 and mat2 shapes cannot be multiplied (32x20 and 32x64)\n";
  EXPECT_EQ(one_line_error(traceback), "mat1 and mat2 shapes cannot be multiplied (32x20 and 32x64)");
}

// What the model's own `raise` says leads, with where its source raised it.
TEST(ErrorText, AnExceptionTheModelRaisesIsItsMessageAndPlace) {
  const std::string traceback =
      "The following operation failed in the TorchScript interpreter.\n"
      "Traceback of TorchScript, serialized code (most recent call last):\n"
      "  File \"code/__torch__.py\", line 10, in forward\n"
      "    if torch.gt(torch.size(x, 0), 0):\n"
      "      ops.prim.RaiseException(\"boom from the user\", \"builtins.RuntimeError\")\n"
      "      ~~~~~~~~~~~~~~~~~~~~~~~ <--- HERE\n"
      "\n"
      "Traceback of TorchScript, original code (most recent call last):\n"
      "  File \"/home/ada/model.py\", line 8, in forward\n"
      "        if x.size(0) > 0:\n"
      "            raise RuntimeError(\"boom from the user\")\n"
      "            ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~ <--- HERE\n"
      "        return self.fc(x)\n"
      "builtins.RuntimeError: boom from the user\n";
  EXPECT_EQ(commtune::raised_by_model(traceback),
            "boom from the user (RuntimeError raised at /home/ada/model.py, line 8, in forward)");
  // An operator's own failure is not the model's raise.
  EXPECT_EQ(commtune::raised_by_model("The following operation failed in the TorchScript interpreter.\n"
                                      "RuntimeError: mat1 and mat2 shapes cannot be multiplied\n"),
            "");
}

TEST(ErrorText, ALeadingNewlineAndSuggestionsGo) {
  EXPECT_EQ(one_line_error("\nUnknown builtin op: aten::foo.\nHere are some suggestions: \n\taten::bar\n"),
            "Unknown builtin op: aten::foo.");
  EXPECT_EQ(one_line_error("  indented\r\n"), "indented");
  EXPECT_EQ(one_line_error(""), "");
}

TEST(ErrorText, AnEnforceLocationGoes) {
  EXPECT_EQ(one_line_error("[enforce fail at inline_container.cc:230] . Attempted to read a PyTorch file with "
                           "version 99, but the maximum supported version for reading is 10."),
            "Attempted to read a PyTorch file with version 99, but the maximum supported version for reading is 10.");
}
