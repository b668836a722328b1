// Case separate-runtime: the one file that compiles the runtime (control.hpp).
#define TRACETREE_RUNTIME_IMPLEMENTATION
#include <tracetree/control.hpp>
