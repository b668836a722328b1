// Cases separate-runtime(-missing): a second file with declarations only, with a session of its own.
#include <tracetree/sessions.hpp>

void separate_work(int n) {
    tracetree::StackSession unused(tracetree::StackRequest("nothing matches this"));
    for (int i = 0; i < n; ++i) {
        TRACETREE_SCOPE("separate work");
    }
}
