// Case hidden-hook (hidden_lib.cpp): what recorder_info() says of the throw hook is what the profile
// holds, and `exported` what the link exports.
//   hidden_main HOOK EXPORTED WORDS
//   HOOK 1    every throw under "hid throw" counted (the library's own and the C++ runtime's)
//   HOOK 0    throw_hook false, its note contains WORDS, and exactly the library's own throws counted
//             (the note says only those are)
//   EXPORTED  1 / 0: what recorder_info().exported must say
// Before issue 42 a library linked with `local: *` reported throw_hook true and counted half.
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {
void hid_run(int n);
long long hid_throws();
int hid_throw_hook();
int hid_exported();
void hid_throw_hook_note(char* note, unsigned long size);
void hid_dump();
}

int main(int argc, char** argv) {
    if (argc != 4) {
        std::printf("FAIL: usage: hidden_main HOOK EXPORTED WORDS\n");
        return 2;
    }
    const int wanted = std::atoi(argv[1]);
    const int n = 50;
    hid_run(n);
    const int hook = hid_throw_hook();
    char note[1024];
    hid_throw_hook_note(note, sizeof note);
    const long long counted = hid_throws();
    const long long expected = hook == 1 ? 2 * n : n;
    if (hook != wanted) {
        std::printf("FAIL: recorder_info().throw_hook is %d, wanted %d; %lld of %d throws counted (note: \"%s\")\n", hook,
                    wanted, counted, 2 * n, note);
        return 1;
    }
    if (hook == 0 && std::strstr(note, argv[3]) == nullptr) {
        std::printf("FAIL: throw_hook_note \"%s\" does not say \"%s\"\n", note, argv[3]);
        return 1;
    }
    if (counted != expected) {
        std::printf("FAIL: throw_hook is %d (note: \"%s\"), and %lld of %d throws counted, wanted %lld\n", hook, note,
                    counted, 2 * n, expected);
        hid_dump();
        return 1;
    }
    if (hid_exported() != std::atoi(argv[2])) {
        std::printf("FAIL: recorder_info().exported is %d, wanted %s\n", hid_exported(), argv[2]);
        return 1;
    }
    std::printf("ok (throw_hook=%d, %lld of %d throws counted, note=\"%s\")\n", hook, counted, 2 * n, note);
    return 0;
}
