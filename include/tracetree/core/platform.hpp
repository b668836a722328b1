// tracetree: what the recorder needs of the platform, said before anything that needs it fails to
// compile. SPDX-License-Identifier: MIT
//
// Annotated files (tracetree.hpp) need only a clock and the anchor (core/recorder.hpp,
// core/anchor.hpp). The recorder, and every header that includes control.hpp, needs Linux: the
// copies of tracetree in a process find each other, and the throw hook finds the C++ runtime's
// __cxa_throw, by walking the loaded modules (dl_iterate_phdr) and reading their ELF dynamic symbol
// tables; the XRay symbol reader reads the executable's ELF file.
#ifndef TRACETREE_CORE_PLATFORM_HPP
#define TRACETREE_CORE_PLATFORM_HPP

#if !defined(__linux__)
#error "tracetree: the recorder (control.hpp and the headers that include it) needs Linux: dl_iterate_phdr and ELF dynamic symbol tables, to find the process's copies of tracetree and the C++ runtime's __cxa_throw (README, Limitations)"
#endif
#if !defined(__GNUC__) && !defined(__clang__)
#error "tracetree: the recorder needs g++ or clang++ (GNU attributes, builtins and the Itanium C++ ABI)"
#endif

#endif  // TRACETREE_CORE_PLATFORM_HPP
