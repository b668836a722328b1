// A file that controls tracing, header-only: control.hpp, one profile() and one annotated function.
// bench/compile/measure.py prices it against the same file in an older tree (--before), to show what
// the runtime alone costs now that the admin listener, views and OTLP are compiled only where their
// headers are included.
#include <tracetree/control.hpp>

int work() {
    TRACETREE_FUNCTION();
    return static_cast<int>(tracetree::profile().threads.size());
}
