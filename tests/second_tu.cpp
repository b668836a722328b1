// Includes the headers a second time in the same program: a definition missing `inline` fails to link.
#include <tracetree/all.hpp>

int second_tu_work(int calls) {
    TRACETREE_FUNCTION();
    int sum = 0;
    for (int i = 0; i < calls; ++i) {
        TRACETREE_SCOPE("second tu loop");
        sum += i;
    }
    return sum;
}

bool second_tu_matches(std::string_view glob, std::string_view name) {  // test_matcher.cpp
    return tracetree::Pattern(glob, tracetree::PatternSyntax::glob).matches(name);
}
