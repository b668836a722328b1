// What every annotated file pays for tracetree: the light header and one use of each macro an
// annotated file writes. bench/compile/measure.py compiles it with and without -DTRACETREE_DISABLE;
// bench/meson.build builds both ways under the project's warnings, so it stays valid code.
//
// Nothing else is included: a standard header here would be priced as the library's.
#include <tracetree/tracetree.hpp>

namespace annotated {

struct Refused {};  // a type of our own: <stdexcept> would price the standard library, not tracetree

// [[maybe_unused]]: with TRACETREE_DISABLE the macros do not evaluate their arguments.
int handle([[maybe_unused]] const char* user, int attempts) {
    TRACETREE_FUNCTION();
    int checked = 0;
    {
        TRACETREE_SCOPE("check");
        TRACETREE_WATCH("attempts", attempts);
        checked = attempts * 2;
    }
    {
        TRACETREE_SCOPE_DYNAMIC(user);
        if (checked > 100) TRACETREE_THROW(Refused{});
    }
    return checked;
}

}  // namespace annotated
