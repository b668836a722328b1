#include <tracetree/all.hpp>
#include <tracetree/xray.hpp>
#include <iostream>
namespace shop { void mid(int); void through(int); struct Cart { void checkout(); }; }
void annotated() { TRACETREE_FUNCTION(); shop::mid(2); shop::Cart().checkout(); }
int main() {
  tracetree::xray::install();
  auto st = tracetree::xray::status();
  std::cout << "functions " << st.functions << " patchable " << st.patchable << " patched " << st.patched << " err=" << st.error << "\n";
  for (auto& f : tracetree::xray::functions()) std::cout << "  " << f.id << " " << f.name << (f.patchable ? "" : " (never)") << "\n";
  annotated();
  {
    tracetree::TraceSession trace(tracetree::TraceRequest("annotated"));
    std::cout << "patched during: " << tracetree::xray::status().patched << "\n";
    annotated();
    for (auto& t : trace.collect(std::chrono::seconds(1))) tracetree::render(std::cout, t);
  }
  std::cout << "patched after: " << tracetree::xray::status().patched << "\n";
  {
    tracetree::Monitor m(tracetree::MonitorRequest("shop::*"));
    for (int i = 0; i < 3; ++i) { try { shop::through(i); } catch (std::exception&) {} }
  }
  annotated();
  tracetree::render(std::cout, tracetree::profile().merged(), std::chrono::system_clock::now());
}
