// Two scopes whose macros land on one line must not shadow each other under the hostile warning set
// (-Wshadow and the rest, -Werror): a one-line function, a user macro expanding to two scopes, a
// scope in a block on the same line. Built twice, with tracing on and compiled out; scripts/test
// builds both with g++ and clang++, as C++17 and C++20: eight configurations.
#include <tracetree/control.hpp>
#include <tracetree/handoff.hpp>
#include <tracetree/tracetree.hpp>

#include <cstdio>
#include <string>

#define TWO_SCOPES() TRACETREE_SCOPE("first"); TRACETREE_SCOPE("second")

static int one_line(int x) { TRACETREE_FUNCTION(); { TRACETREE_SCOPE("block"); TRACETREE_SCOPE_DYNAMIC(std::to_string(x)); TRACETREE_WATCH("x", x); return x + 1; } }
static void by_macro() { TWO_SCOPES(); }
static int handed_off() { TRACETREE_SCOPE("give"); const tracetree::Here here = tracetree::here(); return tracetree::wrap(here, [] { TRACETREE_SCOPE("taken"); return 1; })(); }
static void throws_on_one_line(bool yes) { TRACETREE_SCOPE("a"); TRACETREE_SCOPE("b"); if (yes) TRACETREE_THROW(std::string("no")); }

[[maybe_unused]] static const tracetree::Node* child(const std::vector<tracetree::Node>& nodes, const std::string& name) {
    for (const tracetree::Node& node : nodes)
        if (node.name == name) return &node;
    return nullptr;
}

int main() {
    tracetree::set_thread_name("one-line");
    const int result = one_line(41) + handed_off() - 1;
    by_macro();
    try {
        throws_on_one_line(true);
    } catch (const std::string&) {
    }
    bool ok = result == 42;
#ifdef TRACETREE_DISABLE
    for (const auto& thread : tracetree::profile().threads) ok = ok && thread.roots.empty();  // nothing recorded
#else
    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* thread = nullptr;
    for (const auto& t : profile.threads)
        if (t.thread_name == "one-line") thread = &t;
    ok = ok && thread != nullptr;
    if (ok) {  // each scope on its own node, nested as written
        const tracetree::Node* function = child(thread->roots, "one_line()");
        const tracetree::Node* block = function != nullptr ? child(function->children, "block") : nullptr;
        const tracetree::Node* dynamic = block != nullptr ? child(block->children, "41") : nullptr;
        const tracetree::Node* first = child(thread->roots, "first");
        const tracetree::Node* second = first != nullptr ? child(first->children, "second") : nullptr;
        const tracetree::Node* a = child(thread->roots, "a");
        const tracetree::Node* b = a != nullptr ? child(a->children, "b") : nullptr;
        const tracetree::Node* taken = nullptr;  // under the hand-off's path, not the scope itself
        for (const tracetree::Node& root : thread->roots)
            if (root.name == "give" && root.continued) taken = child(root.children, "taken");
        ok = dynamic != nullptr && dynamic->count == 1 && second != nullptr && second->count == 1 && b != nullptr &&
             b->throws == 1 && a->throws == 1 && taken != nullptr && taken->count == 1;
    }
#endif
    std::printf("%s\n", ok ? "one-line scopes: ok" : "one-line scopes: WRONG");
    return ok ? 0 : 1;
}
