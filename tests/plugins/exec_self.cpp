// A program that execv()s itself keeps its environment, and with it the variable through which its
// previous image published the recorder's address. That address means nothing in the new image: the
// variable's name carries the image's AT_RANDOM bytes, so the new image must start its own recorder.
//   exec-self            records, then execs itself as `exec-self --child NAME ADDRESS`
//   exec-self --child    checks it did not take NAME's recorder; exits 0 when all is well
#include <tracetree/all.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <unistd.h>

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
    std::cout << (ok ? "ok: " : "FAILED: ") << what << "\n";
    failures += ok ? 0 : 1;
}

void recorded_work() { TRACETREE_FUNCTION(); }

std::string own_name() {
    char name[128];
    tracetree::detail::published_name(name);
    return name;
}

std::string address_of(const void* pointer) {
    char text[32];
    std::snprintf(text, sizeof text, "%llx", static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(pointer)));
    return text;
}

std::uint64_t calls_of_recorded_work() {
    std::uint64_t calls = 0;
    for (const auto& thread : tracetree::profile().threads)
        for (const auto& root : thread.roots)
            if (root.name == "(anonymous namespace)::recorded_work()") calls += root.count;
    return calls;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 4 && std::strcmp(argv[1], "--child") == 0) {
        const std::string parent_name = argv[2], parent_address = argv[3];
        const char* inherited = std::getenv(parent_name.c_str());
        check(inherited != nullptr && parent_address == inherited, "the previous image's variable is inherited: " + parent_name);
        check(own_name() != parent_name, "this image publishes under another name: " + own_name());
        // Had it taken the inherited address, it would have published nothing of its own. (The two
        // addresses may be equal: allocators without randomisation, ASan's, place it alike.)
        const char* own = std::getenv(own_name().c_str());
        check(own != nullptr && address_of(&tracetree::detail::runtime()) == own,
              "this image started its recorder and published it itself");
        check(tracetree::recorder_info().others.empty(), "the stale variable is not listed as another recorder");
        recorded_work();
        recorded_work();
        check(calls_of_recorded_work() == 2, "this image records and reads its own profile");
        return failures == 0 ? 0 : 1;
    }
    recorded_work();
    check(calls_of_recorded_work() == 1, "the first image records");
    const std::string name = own_name();
    const char* address = std::getenv(name.c_str());
    check(address != nullptr, "the first image published its recorder as " + name);
    if (failures != 0 || address == nullptr) return 1;
    std::cout.flush();
    const std::string child_address = address;  // argv must not point into the environment we pass on
    char* child_argv[] = {argv[0], const_cast<char*>("--child"), const_cast<char*>(name.c_str()),
                          const_cast<char*>(child_address.c_str()), nullptr};
    execv("/proc/self/exe", child_argv);
    std::perror("execv");
    return 1;
}
