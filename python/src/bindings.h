// The parts of the _strata extension module, each binding one area (module.cc puts them together).
#pragma once

#include <pybind11/pybind11.h>

namespace strata::python {

void BindEngine(pybind11::module_& m);        // Engine, Turn (engine_py.cc)
void BindContextLog(pybind11::module_& m);    // ContextLog, History (context_log_py.cc)
void BindTokens(pybind11::module_& m);        // count_tokens, encode, decode (context_log_py.cc)
void BindConversation(pybind11::module_& m);  // Conversation (conversation_py.cc)

}  // namespace strata::python
