// A thread of tracetree's own that takes no signal meant for the program. SPDX-License-Identifier: MIT
#ifndef TRACETREE_RUNTIME_SIGNAL_MASK_HPP
#define TRACETREE_RUNTIME_SIGNAL_MASK_HPP

#include "../core/abi.hpp"

#include <pthread.h>  // pthread_sigmask
#include <signal.h>
#include <thread>
#include <utility>

TRACETREE_BEGIN_NAMESPACE
namespace detail {

// `body` on a new thread that blocks every signal. A signal sent to the process goes to a thread that
// does not block it; the program's own threads must stay the only ones, or a program that blocks a
// signal except while it waits for it (ninja blocks SIGCHLD but in ppoll()) sees it handled on the
// admin listener's or the OTLP sender's thread and never wakes. The caller's mask is restored before
// this returns.
template <class Body>
std::thread thread_without_signals(Body&& body) {
    sigset_t all, previous;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, &previous);
    try {
        std::thread thread(std::forward<Body>(body));
        ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
        return thread;
    } catch (...) {
        ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
        throw;
    }
}

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_RUNTIME_SIGNAL_MASK_HPP
