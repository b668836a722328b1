#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

// A run whose filters match no test case fails: the stress areas pick their file with --source-file,
// and a renamed file would otherwise pass with nothing run.
namespace {
int g_selected = -1;  // test cases that passed the filters; -1: no run (a query such as --list-test-cases)

struct SelectedCount : doctest::IReporter {
    explicit SelectedCount(const doctest::ContextOptions&) {}
    void test_run_end(const doctest::TestRunStats& stats) override {
        g_selected = static_cast<int>(stats.numTestCasesPassingFilters);
    }
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_case_start(const doctest::TestCaseData&) override {}
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats&) override {}
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};
DOCTEST_REGISTER_LISTENER("selected-count", 0, SelectedCount);
}  // namespace

int main(int argc, char** argv) {
    doctest::Context context(argc, argv);
    const int result = context.run();
    if (context.shouldExit() || result != 0 || g_selected != 0) return result;
    std::fprintf(stderr, "no test case matches the filters given: nothing was tested\n");
    return 1;
}
