/* sha256 vectors and the canonical JSON the golden hashes are defined over. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

Test(hash, sha256_known_vectors)
{
    char hex[65];
    gf_sha256_of("", 0, hex);
    cr_expect_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    gf_sha256_of("abc", 3, hex);
    cr_expect_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    gf_sha256_of(two, strlen(two), hex);
    cr_expect_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* a million 'a's, fed in uneven pieces */
    gf_sha256 s;
    gf_sha256_init(&s);
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    gf_sha256_update(&s, a, 1);
    gf_sha256_update(&s, a, 63);
    gf_sha256_update(&s, a, 999936);
    gf_sha256_hex(&s, hex);
    free(a);
    cr_expect_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

Test(hash, canonical_json_form)
{
    json_error_t err;
    json_t *v = json_loads("{\"b\": [1, 2.5, 1e-4, 3.0, 0.1, 1e300], \"a\": \"q\\\"\\\\\\n\\u00e9\", "
                           "\"c\": {\"z\": null, \"y\": true, \"x\": false}, \"\\u00e9\": -7}",
                           0, &err);
    cr_assert_not_null(v, "%s", err.text);
    char *s = gf_canonical_json(v);
    cr_expect_str_eq(s, "{\"a\":\"q\\\"\\\\\\u000a\xc3\xa9\",\"b\":[1,2.5,0.0001,3.0,0.1,1e+300],"
                        "\"c\":{\"x\":false,\"y\":true,\"z\":null},\"\xc3\xa9\":-7}");
    free(s);
    json_decref(v);
    json_t *r = json_array(); /* jansson holds no NaN/inf reals: cases carry them otherwise */
    json_array_append_new(r, json_real(1.0 / 3.0));
    json_array_append_new(r, json_real(-2.0));
    json_array_append_new(r, json_real(123456789012345678.0));
    s = gf_canonical_json(r);
    cr_expect_str_eq(s, "[0.3333333333333333,-2.0,1.2345678901234568e+17]");
    free(s);
    json_decref(r);
}

Test(hash, case_hash_ignores_comparison_keys_only)
{
    json_t *a =
        json_pack("{s:s, s:s, s:i, s:f}", "id", "x", "kind", "golden_generation", "max_new_tokens", 64, "atol", 1e-4);
    json_t *b = json_pack("{s:s, s:s, s:i, s:f, s:[s]}", "id", "x", "kind", "golden_generation", "max_new_tokens", 64,
                          "atol", 1e-3, "tags", "slow");
    json_t *c = json_pack("{s:s, s:s, s:i}", "id", "x", "kind", "golden_generation", "max_new_tokens", 63);
    char ha[65], hb[65], hc[65];
    cr_assert_eq(gf_case_hash(a, ha), GF_OK);
    cr_assert_eq(gf_case_hash(b, hb), GF_OK);
    cr_assert_eq(gf_case_hash(c, hc), GF_OK);
    cr_expect_str_eq(ha, hb, "atol and tags do not change the hash");
    cr_expect_str_neq(ha, hc, "max_new_tokens does");
    json_decref(a);
    json_decref(b);
    json_decref(c);
}
