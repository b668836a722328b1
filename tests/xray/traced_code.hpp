// Code nobody annotated, built with -fxray-instrument: what the XRay tests trace. traced_code.cpp
// includes nothing of tracetree; its functions advance a clock of their own, which the tests install
// as tracetree's clock, so that traced costs are exact.
#ifndef TRACETREE_TESTS_XRAY_TRACED_CODE_HPP
#define TRACETREE_TESTS_XRAY_TRACED_CODE_HPP

#include <atomic>
#include <cstdint>
#include <csetjmp>
#include <setjmp.h>  // sigjmp_buf
#include <string>

namespace xtest {

extern std::atomic<std::uint64_t> now_ns;  // the tests' clock: each function below advances it

void leaf();                         // 1 us
void parent(int leaves);             // 2 us, then `leaves` calls of leaf()
void recurse(int depth);             // 1 us per level, leaf() at the bottom
void call(void (*callback)());       // 1 us, the callback, 1 us
void thrower(int depth);             // `depth` nested calls of itself, then throws std::runtime_error
void catches(int depth);             // calls thrower(depth) and catches what it throws, then leaf()
int tail_caller(int value);          // 1 us, then a tail call of tail_target
int tail_target(int value);          // 1 us
void jumps_back(std::jmp_buf& to);
void chain_top();                    // 1 us, chain_mid(), leaf(): three calls down to parent(1), four to leaf()
void chain_mid();                    // 1 us, chain_low()
void chain_low();                    // 1 us, parent(1)
int tail_outer(int value);           // 1 us, tail_relay(), leaf()
int tail_relay(int value);           // 1 us, then a tail call of tail_worker
int tail_worker(int value);          // 1 us, leaf()   // leaf(), then a longjmp to `to` from a nested call
int hidden_caller();                 // calls a function of an anonymous namespace
void on_signal(int signal);          // a signal handler: leaf(), then counts the signal in signals_handled
void on_signal_jumps(int signal);    // a signal handler: leaf(), then a siglongjmp to *handler_exit
extern std::atomic<int> signals_handled;
extern sigjmp_buf* handler_exit;
std::string label(int value);        // its symbol carries an ABI tag: label[abi:cxx11](int)

struct Cart {
    int checkout(int items) const;
    static int count();
};
struct Pricer {
    int operator()(int cents) const;
};
template <class T>
T twice(T value);
extern template int twice<int>(int);

}  // namespace xtest

#endif
