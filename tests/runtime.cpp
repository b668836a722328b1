// The runtime of the test programs, compiled once per build folder: their files are built with
// TRACETREE_SEPARATE_RUNTIME and compile declarations only (control.hpp, "Compiling the runtime once").
#define TRACETREE_RUNTIME_IMPLEMENTATION
#include <tracetree/control.hpp>
