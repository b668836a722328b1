// tracetree's version, said once: meson.build and CMakeLists.txt read these three lines.
// SPDX-License-Identifier: MIT
#ifndef TRACETREE_CORE_VERSION_HPP
#define TRACETREE_CORE_VERSION_HPP

#define TRACETREE_VERSION_MAJOR 0
#define TRACETREE_VERSION_MINOR 2
#define TRACETREE_VERSION_PATCH 0

#endif  // TRACETREE_CORE_VERSION_HPP
