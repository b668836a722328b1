// Built with -fxray-instrument and nothing of tracetree (tests/xray/meson.build): the functions are
// noinline so that each keeps its own sleds.
#include "traced_code.hpp"

#include <stdexcept>

namespace xtest {

std::atomic<std::uint64_t> now_ns{1000000000};
volatile int g_sink = 0;

// Inlined at every optimisation level: no function of its own to appear in the traces.
__attribute__((always_inline)) inline void spend(std::uint64_t microseconds) { now_ns += microseconds * 1000; }

[[gnu::noinline]] void leaf() {
    spend(1);
    g_sink = g_sink + 1;
}

[[gnu::noinline]] void parent(int leaves) {
    spend(2);
    for (int i = 0; i < leaves; ++i) leaf();
}

[[gnu::noinline]] void recurse(int depth) {
    spend(1);
    if (depth > 0) recurse(depth - 1);
    else leaf();
    g_sink = g_sink + 1;  // not a tail call
}

[[gnu::noinline]] void call(void (*callback)()) {
    spend(1);
    callback();
    spend(1);
    g_sink = g_sink + 1;
}

[[gnu::noinline]] void thrower(int depth) {
    spend(1);
    if (depth == 0) throw std::runtime_error("deep");
    thrower(depth - 1);
    g_sink = g_sink + 1;
}

[[gnu::noinline]] void catches(int depth) {
    try {
        thrower(depth);
    } catch (const std::runtime_error&) {
        spend(1);
    }
    leaf();
    g_sink = g_sink + 1;
}

[[gnu::noinline]] int tail_target(int value) {
    spend(1);
    return value + g_sink;
}

[[gnu::noinline]] int tail_caller(int value) {
    spend(1);
    [[clang::musttail]] return tail_target(value + 1);
}

[[gnu::noinline]] static void jump(std::jmp_buf& to) {
    leaf();
    std::longjmp(to, 1);
}

[[gnu::noinline]] void jumps_back(std::jmp_buf& to) {
    leaf();
    jump(to);
}

[[gnu::noinline]] void chain_low() {
    spend(1);
    parent(1);
    g_sink = g_sink + 1;
}
[[gnu::noinline]] void chain_mid() {
    spend(1);
    chain_low();
    g_sink = g_sink + 1;
}
[[gnu::noinline]] void chain_top() {
    spend(1);
    chain_mid();
    leaf();
    g_sink = g_sink + 1;
}

[[gnu::noinline]] int tail_worker(int value) {
    spend(1);
    leaf();
    return value + g_sink;
}
[[gnu::noinline]] int tail_relay(int value) {
    spend(1);
    [[clang::musttail]] return tail_worker(value + 1);
}
[[gnu::noinline]] int tail_outer(int value) {
    spend(1);
    const int relayed = tail_relay(value);
    leaf();
    return relayed + g_sink;
}

namespace {
[[gnu::noinline]] int hidden(int value) { return value + g_sink; }
}  // namespace

[[gnu::noinline]] int hidden_caller() { return hidden(1) + 1; }

std::atomic<int> signals_handled{0};
sigjmp_buf* handler_exit = nullptr;
[[gnu::noinline]] void on_signal(int) {
    leaf();
    signals_handled.fetch_add(1);
}
[[gnu::noinline]] void on_signal_jumps(int) {
    leaf();
    signals_handled.fetch_add(1);
    siglongjmp(*handler_exit, 1);
}

[[gnu::noinline]] std::string label(int value) { return std::to_string(value + g_sink); }

[[gnu::noinline]] int Cart::checkout(int items) const { return items + g_sink; }
[[gnu::noinline]] int Cart::count() { return g_sink; }
[[gnu::noinline]] int Pricer::operator()(int cents) const { return cents + g_sink; }

template <class T>
[[gnu::noinline]] T twice(T value) {
    return value + value + static_cast<T>(g_sink);
}
template int twice<int>(int);

}  // namespace xtest
