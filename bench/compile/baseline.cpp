// The baseline an annotated file is priced against (docs/benchmarks.md): a file that includes the two
// standard headers nearly every C++ file includes anyway.
#include <string>
#include <vector>
