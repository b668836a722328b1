// Includes the header a second time in the same program: a definition missing `inline` fails to link.
#include <tracetree/tracetree.hpp>

int second_tu_work(int calls) {
    TRACETREE_FUNCTION();
    int sum = 0;
    for (int i = 0; i < calls; ++i) {
        TRACETREE_SCOPE("second tu loop");
        sum += i;
    }
    return sum;
}
