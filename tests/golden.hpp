// Golden files: expected output checked in under tests/golden/ (the core's text) and
// tests/views/golden/ (the views). To regenerate after an intended change, run the suite with
// TRACETREE_UPDATE_GOLDEN=1 (each compare then rewrites its file and passes) and review
// `git diff tests/golden tests/views/golden`.
#ifndef TRACETREE_TESTS_GOLDEN_HPP
#define TRACETREE_TESTS_GOLDEN_HPP

#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#ifndef TRACETREE_GOLDEN_DIR
#error "the build passes the golden directory"
#endif

namespace golden {

inline std::string path(const std::string& name) { return std::string(TRACETREE_GOLDEN_DIR) + "/" + name; }

inline std::string read(const std::string& name) {
    std::ifstream in(path(name), std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

inline void compare(const std::string& name, const std::string& actual) {
    if (std::getenv("TRACETREE_UPDATE_GOLDEN") != nullptr) {
        std::ofstream(path(name), std::ios::binary) << actual;
        return;
    }
    const std::string expected = read(name);
    INFO("golden file " << path(name) << " (TRACETREE_UPDATE_GOLDEN=1 rewrites it)");
    CHECK(expected == actual);
}

}  // namespace golden

#endif  // TRACETREE_TESTS_GOLDEN_HPP
