// The questions a linking case asks one copy of tracetree's control code (probe.cpp). Plain C
// types only: the copies in one program may use different standard-library ABIs (case abi), so
// nothing of the standard library crosses between them. Each probe object is compiled with its own
// PROBE prefix (probe_, dbg_, abi0_, nortti_, ...): PROBE_FN(count) is probe_count, dbg_count, ...
#ifndef TRACETREE_TESTS_LINKING_PROBE_HPP
#define TRACETREE_TESTS_LINKING_PROBE_HPP

#ifndef PROBE
#define PROBE probe
#endif
#define PROBE_CAT2(a, b) a##_##b
#define PROBE_CAT(a, b) PROBE_CAT2(a, b)
#define PROBE_FN(name) PROBE_CAT(PROBE, name)
#define PROBE_STR2(a) #a
#define PROBE_STR(a) PROBE_STR2(a)

// Hidden: a library or plugin that links a probe keeps it to itself (two libraries each have their
// own), while tracetree's own symbols keep the visibility a user's build gives them.
#define PROBE_API extern "C" __attribute__((visibility("hidden")))

// Runs `n` calls of the scope "<PROBE> work" (an annotated scope in the probe's own translation unit).
PROBE_API void PROBE_FN(work)(int n);
// Calls of scopes named `name`, summed over every thread and path of this copy's profile().
PROBE_API long long PROBE_FN(count)(const char* name);
// Throws counted in throw nodes under scopes named `scope` (null: anywhere).
PROBE_API long long PROBE_FN(throws)(const char* scope);
// Throws counted in throw nodes whose name contains `type`, anywhere.
PROBE_API long long PROBE_FN(throws_of)(const char* type);
// recorder_info(): 1 / 0, or -1 when this version of RecorderInfo has no such field.
PROBE_API int PROBE_FN(throw_hook)();
PROBE_API int PROBE_FN(exported)();
// recorder_info().throw_hook_note copied into `note` ("" when there is no such field).
PROBE_API void PROBE_FN(throw_hook_note)(char* note, unsigned long size);
// recorder_info().refused (why this copy records nothing) into `out`; "-" when there is no such field.
PROBE_API void PROBE_FN(refused)(char* out, unsigned long size);
// recorder_info().others (the recorders of other versions and ABIs), joined by spaces, into `out`.
PROBE_API void PROBE_FN(others)(char* out, unsigned long size);
// This copy's profile, merged, on stderr: what a failing case saw.
PROBE_API void PROBE_FN(dump)();
// Case on-trace-throw: a callback that throws while the program has `outer` open. Returns the
// throws counted in throw nodes anywhere in the profile afterwards (0 expected), -1 when the
// callback did not run.
PROBE_API long long PROBE_FN(on_trace_throw)();

#endif
