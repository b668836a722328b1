// tracetree, all of it: for small programs and the one file of a service that asks for traces.
// SPDX-License-Identifier: MIT
//
//   #include <tracetree/all.hpp>
//
// Annotated files include <tracetree/tracetree.hpp> only: it costs them less to compile than <string>.
#ifndef TRACETREE_ALL_HPP
#define TRACETREE_ALL_HPP

#include "tracetree.hpp"  // the macros
#include "control.hpp"    // profiles, the timeline, limits
#include "handoff.hpp"    // work that crosses threads
#include "coroutine.hpp"  // scopes held across co_await
#include "sessions.hpp"   // trace, stack, watch, monitor, the flight recorder
#include "render.hpp"     // Arthas and human text
#include "views.hpp"      // flame graphs, folded stacks, Chrome traces, JSON, diffs

#endif  // TRACETREE_ALL_HPP
