/* The schema a child's record must hold to before its verdict is believed
 * (harness/run/jobs.c gf_runner_record_check; issue 12, item 5). The nonce
 * half of the check (pool.c) is covered end to end by tests/cli/
 * isolation_faults.sh (a forged record is crash). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

#include "runner.h"

static json_t *record(const char *text)
{
    json_error_t e;
    json_t *r = json_loads(text, 0, &e);
    cr_assert_not_null(r, "bad JSON in the test: %s", e.text);
    return r;
}

static void refused(const char *text, const char *why_has)
{
    json_t *r = record(text);
    char why[256] = "";
    cr_expect_eq(gf_runner_record_check(r, "c.one", why, sizeof why), 0, "accepted: %s", text);
    cr_expect(strstr(why, why_has) != NULL, "why '%s' lacks '%s' (%s)", why, why_has, text);
    json_decref(r);
}

static void accepted(const char *text)
{
    json_t *r = record(text);
    char why[256] = "";
    cr_expect_eq(gf_runner_record_check(r, "c.one", why, sizeof why), 1, "refused (%s): %s", why, text);
    json_decref(r);
}

#define OK_CHECK  "{\"name\": \"a\", \"passed\": true, \"detail\": \"\"}"
#define BAD_CHECK "{\"name\": \"b\", \"passed\": false, \"detail\": \"off\"}"

Test(record_check, a_whole_record_is_accepted)
{
    accepted("{\"case\": \"c.one\", \"verdict\": \"pass\", \"reason\": \"\", \"checks\": [" OK_CHECK
             "], \"metrics\": {}}");
    accepted("{\"case\": \"c.one\", \"verdict\": \"pass\", \"reason\": \"\", \"checks\": [],"
             " \"metrics\": {\"comparisons\": {\"x\": {}}}}"); /* a comparison is evidence too */
    accepted("{\"case\": \"c.one\", \"verdict\": \"fail\", \"reason\": \"b: off\", \"checks\": [" OK_CHECK
             ", " BAD_CHECK "], \"metrics\": {}}");
    accepted(
        "{\"case\": \"c.one\", \"verdict\": \"skip\", \"reason\": \"no device\", \"checks\": [], \"metrics\": {}}");
    accepted("{\"case\": \"c.one\", \"verdict\": \"fail\", \"reason\": \"open\", \"checks\": [], \"metrics\": {}}");
}

Test(record_check, a_forged_pass_is_refused)
{
    /* what tests/backends/faulty.c's forged-record writes, case id added */
    refused("{\"case\": \"c.one\", \"verdict\": \"pass\", \"reason\": \"forged\", \"checks\": [], \"metrics\": {}}",
            "no check run");
    refused("{\"case\": \"c.one\", \"verdict\": \"pass-near-tie\", \"reason\": \"\", \"checks\": [" BAD_CHECK
            "], \"metrics\": {}}",
            "check 'b' failed");
}

Test(record_check, fields_off_the_schema_are_refused)
{
    refused("{\"case\": \"c.one\", \"reason\": \"\", \"checks\": [], \"metrics\": {}}", "no verdict");
    refused("{\"case\": \"c.one\", \"verdict\": \"passed\", \"reason\": \"\", \"checks\": [], \"metrics\": {}}",
            "not a verdict");
    refused("{\"case\": \"c.one\", \"verdict\": \"fail\", \"checks\": [], \"metrics\": {}}", "no reason");
    refused("{\"case\": \"c.one\", \"verdict\": \"fail\", \"reason\": \"\", \"checks\": {}, \"metrics\": {}}",
            "no checks array");
    refused("{\"case\": \"c.one\", \"verdict\": \"fail\", \"reason\": \"\", \"checks\": []}", "no metrics");
    refused("{\"case\": \"c.one\", \"verdict\": \"fail\", \"reason\": \"\", \"checks\": [{\"name\": \"a\"}],"
            " \"metrics\": {}}",
            "check 0 has no name or no passed flag");
}

Test(record_check, another_cases_record_is_refused)
{
    refused("{\"case\": \"c.two\", \"verdict\": \"pass\", \"reason\": \"\", \"checks\": [" OK_CHECK
            "], \"metrics\": {}}",
            "not this case's");
    refused("{\"verdict\": \"pass\", \"reason\": \"\", \"checks\": [" OK_CHECK "], \"metrics\": {}}", "case '(none)'");
}
