// The compiled-out kernel: this translation unit alone is built with -DTRACETREE_DISABLE, the way a
// user strips tracing from a release build, so the scope below must cost nothing at all.
#include "kernels.hpp"

#include <tracetree/tracetree.hpp>

namespace bench {

std::uint64_t run_compiled_out(std::uint64_t n) {
    for (std::uint64_t i = 0; i < n; ++i) {
        TRACETREE_SCOPE("bench.compiled_out");
        clobber();
    }
    return n;
}

}  // namespace bench
