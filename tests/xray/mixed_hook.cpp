// Built by clang++ -fxray-instrument in a g++ program (mixed_gcc.sh): the one file that includes
// tracetree/xray/xray.hpp, whose static initialiser listens for sessions.
#include <tracetree/control.hpp>
#include <tracetree/xray/xray.hpp>
