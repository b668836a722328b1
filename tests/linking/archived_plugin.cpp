// Cases plain-*: plugin.cpp linked from a static archive under -Wl,--exclude-libs,ALL, which keeps every
// symbol of the archive (tracetree's anchor too) out of the dynamic symbol table; this file exports
// its work. Built with ENTRY=plugin_work (a plugin) or ENTRY=linked_archived_work (a linked library).
extern "C" void archived_plugin_work(int n);
extern "C" __attribute__((visibility("default"))) void ENTRY(int n) { archived_plugin_work(n); }
