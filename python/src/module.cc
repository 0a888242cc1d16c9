// _strata: the extension module behind `import strata` (python/strata/__init__.py re-exports it).
#include "bindings.h"

PYBIND11_MODULE(_strata, m) {
  m.doc() = "Strata's engine in process (use it through the strata package).";
  strata::python::BindEngine(m);
  strata::python::BindContextLog(m);
  strata::python::BindTokens(m);
  strata::python::BindConversation(m);
}
