// The tracetree-runtime library (meson `dependency('tracetree-runtime')`, CMake `tracetree::runtime`,
// pkg-config `tracetree-runtime`): the runtime and TRACETREE_ADMIN's listener, compiled once.
// SPDX-License-Identifier: MIT
//
// The targets build every file of a program that links it with TRACETREE_SEPARATE_RUNTIME: those
// files compile the runtime's declarations only (control.hpp, "Compiling the runtime once").
#define TRACETREE_RUNTIME_IMPLEMENTATION
#include <tracetree/admin/server.hpp>  // TRACETREE_ADMIN's listener, which runtime() starts
#include <tracetree/control.hpp>
