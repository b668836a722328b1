// Precompiled for the test programs of several unity units (cpp_pch in tests/meson.build, clang++
// builds only): what each of their units includes, parsed and instantiated once per program instead of
// once per unit. The units still include what they use: the g++ builds, and -Db_pch=false, compile them
// without this.
#include <tracetree/all.hpp>
#include <tracetree/runtime/runtime.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
