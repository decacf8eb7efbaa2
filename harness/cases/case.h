/* Case files (docs/cases.md): YAML read with libyaml into a small node tree,
 * then checked against each kind's schema into a gf_case.
 *
 * harness/case.c is the only file that includes <yaml.h>; everything here is
 * plain C. Every schema error names FILE:LINE:COLUMN (1-based). */
#ifndef GENFENCE_HARNESS_CASE_H
#define GENFENCE_HARNESS_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "compare.h"
#include "genfence/util.h" /* gf_path_join, gf_env_limit */

/* ---- the node tree ---- */

typedef enum gf_ynode_type { GF_YN_SCALAR = 1, GF_YN_SEQ = 2, GF_YN_MAP = 3 } gf_ynode_type;

typedef struct gf_ynode gf_ynode;
struct gf_ynode {
    gf_ynode_type type;
    int line, col; /* 1-based start of the node */
    char *value;   /* scalar text (NUL-terminated) */
    size_t len;
    int plain;           /* plain style: YAML core-schema resolution applies */
    char *tag;           /* explicit tag (resolved, e.g. tag:yaml.org,2002:str) or NULL */
    size_t n;            /* sequence items, or mapping pairs */
    gf_ynode **items;    /* sequence: n items; mapping: 2n (key, value, key, value...) */
    unsigned char *used; /* mapping: n flags, set when the schema read the pair */
};

/* YAML 1.2 core schema types of a scalar. */
typedef enum gf_yscalar {
    GF_YS_NULL = 1, /* ~, null, Null, NULL, empty */
    GF_YS_BOOL,     /* true/True/TRUE/false/False/FALSE */
    GF_YS_INT,      /* [-+]?[0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+ */
    GF_YS_FLOAT,    /* decimals, exponents, [-+]?.inf, .nan */
    GF_YS_STR,
} gf_yscalar;

typedef struct gf_yvalue {
    gf_yscalar type;
    int b;
    long long i;
    int overflow; /* an int outside long long (i saturated); the tree builder refuses it */
    double d;     /* also set for ints */
} gf_yvalue;

/* Resolve a scalar node under the core schema (quoted scalars are strings;
 * explicit !!str/!!int/!!float/!!bool/!!null tags are honoured). */
gf_yvalue gf_yscalar_resolve(const gf_ynode *n);
/* The cap on a case file's tree in bytes, aliases expanded: 64 MiB, or
 * $GENFENCE_YAML_MAX_BYTES. */
size_t gf_yaml_max_bytes(void);
const char *gf_ynode_type_name(const gf_ynode *n); /* "a mapping", "a string", ... */

/* ---- reading a mapping against a schema ---- */

typedef struct gf_key_census gf_key_census;

typedef struct gf_cctx {
    const char *file; /* path as given */
    char **errors;    /* "FILE:LINE:COL: message" */
    size_t n_errors, cap;
    const char *root;      /* repository root for relative model paths */
    gf_key_census *census; /* gf_kind_keys: records the keys a parse asks of the case map; NULL otherwise */
} gf_cctx;

/* Another YAML file genfence reads through this layer (a baseline of known
 * findings, harness/report/baseline.c): the node tree of the file at path,
 * read with the case files' limits (a regular file, GENFENCE_CASE_MAX_BYTES);
 * NULL with "PATH:LINE:COL: message" errors in ctx (ctx->file = path; free
 * them with gf_y_strings_free). Read it with the gf_y_* readers below. */
gf_ynode *gf_yaml_read_file(gf_cctx *ctx, const char *path);
void gf_ynode_free(gf_ynode *n); /* NULL-safe */

/* Record "FILE:LINE:COL: message" at node n (or at line/col 0 if n is NULL). */
void gf_y_error(gf_cctx *ctx, const gf_ynode *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

enum { GF_Y_OPTIONAL = 0, GF_Y_REQUIRED = 1 };

/* The value node under key (marked used), or NULL if absent; a required
 * missing key is an error at the mapping. */
const gf_ynode *gf_y_get(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags);

/* Typed getters. Return 1 when present and valid (stored in *out), 0 when
 * absent (and optional: *out untouched), -1 on an error (recorded). A null
 * value counts as absent for optional keys. */
int gf_y_double(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, double *out);
int gf_y_int(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, long long lo, long long hi, long long *out);
int gf_y_bool(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, int *out);
int gf_y_string(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, char **out);
/* One of the given words (NULL-terminated); *out = its index. */
int gf_y_enum(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, const char *const *words, int *out);

/* Node-level conversions (for list items). */
int gf_y_node_double(gf_cctx *ctx, const gf_ynode *n, const char *what, double *out);
int gf_y_node_int(gf_cctx *ctx, const gf_ynode *n, const char *what, long long lo, long long hi, long long *out);
int gf_y_node_string(gf_cctx *ctx, const gf_ynode *n, const char *what, char **out);
/* n must be a mapping / sequence, else an error naming `what`. */
int gf_y_node_is_map(gf_cctx *ctx, const gf_ynode *n, const char *what);
int gf_y_node_is_seq(gf_cctx *ctx, const gf_ynode *n, const char *what);

/* Lists: a sequence of numbers (malloc'd, *n_out entries); min_len items at least. */
int gf_y_doubles(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, size_t min_len, double **out,
                 size_t *n_out);
int gf_y_ints(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, long long lo, long long hi, size_t min_len,
              int32_t **out, size_t *n_out);
/* A sequence of equally long number sequences: (rows, cols) row-major. A
 * flat sequence of numbers counts as one row when allow_flat. */
int gf_y_matrix(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, int allow_flat, double **out,
                size_t *rows, size_t *cols);
/* A sequence of strings. */
int gf_y_strings(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, char ***out, size_t *n_out);
void gf_y_strings_free(char **v, size_t n);

/* A key the kind refuses although a shared reader it calls would read it
 * (a fence takes no penalties): its key node when present (marked read, for
 * the caller's own error), else NULL. gf_kind_keys leaves it out of the
 * kind's keys. */
const gf_ynode *gf_y_refuse(gf_cctx *ctx, const gf_ynode *map, const char *key);

/* Errors for every key of map that the schema did not read ("unknown key 'x'
 * for kind K; known: a, b"). */
void gf_y_check_unknown(gf_cctx *ctx, const gf_ynode *map, const char *where);

/* gate: {abs, ulps} (either may be omitted: defaults GF_GATE_ABS and GF_GATE_ULPS, verdict/compare.h). */
int gf_y_gate(gf_cctx *ctx, const gf_ynode *map, const char *key, gf_gate *out);

/* ---- cases ---- */

/* What the loader needs of a case kind (the kinds themselves are in
 * harness/kinds/, above this layer, and come in as a NULL-terminated list). */
typedef struct gf_kind_def gf_kind_def;
typedef struct gf_case gf_case;
typedef struct gf_krun gf_krun; /* harness/record: the run record of one (case, backend) */

/* What a kind needs from the case: nothing, a model directory for its
 * tokenizer only, or a model it loads (the loader requires / refuses the
 * `model` key accordingly). */
typedef enum gf_kind_needs {
    GF_KIND_NEEDS_NOTHING = 0,
    GF_KIND_NEEDS_TOKENIZER,
    GF_KIND_NEEDS_MODEL,
} gf_kind_needs;

/* Which backend slots a kind's run reaches: none (the engine's own code:
 * stream_decode, left_padding_positions ...), only the sample slot (the
 * sampler kinds, when the backend has one), or the model slots (model_load,
 * cache_*, forward; the child opens model + backend, gf_session_open, and the
 * sample slot when the backend has one). `genfence run` runs a kind on a
 * backend only where the backend has what it reaches; the rest runs once, on
 * the engine (the speculate and logprobs slots likewise: GF_KIND_REACHES_SPECULATE,
 * GF_KIND_REACHES_LOGPROBS).
 * A kind that calls a slot it does not declare fails
 * tests/unit/test_kind_reach.c. */
typedef enum gf_kind_reach {
    GF_KIND_REACHES_NONE = 0,
    GF_KIND_REACHES_SAMPLE,
    GF_KIND_REACHES_MODEL,
    /* only the speculate slot (speculative_sampling), model NULL: like
     * SAMPLE, on a backend with the slot, else once on the engine */
    GF_KIND_REACHES_SPECULATE,
    /* only the logprobs slot (logprobs), model NULL: likewise */
    GF_KIND_REACHES_LOGPROBS,
} gf_kind_reach;

struct gf_kind_def {
    const char *name;
    const char *summary;
    gf_kind_needs needs;
    gf_kind_reach reaches;
    /* Read the kind's keys from map into c->spec; 0 ok, -1 error (recorded).
     * Its keys are the ones it asks for (gf_kind_keys): every key reader it
     * may call on map must be called on an empty map too. */
    int (*parse)(gf_cctx *ctx, const gf_ynode *map, gf_case *c);
    void (*free_spec)(void *spec);
    /* Run in the child; results go into k. */
    void (*run)(const gf_case *c, gf_krun *k);
    /* The statistical tier (harness/run/plan.c). defers_to_statistical: the
     * kind judges token equality against a fp32 reference, so a backend with
     * lower-precision weights is skipped where a statistical case judges
     * them. judges_weights (the statistical kind): does case c have
     * thresholds, or a calibrated null, for the weight type (and KV cache
     * type: "" = f32)? */
    int defers_to_statistical;
    /* A kind that reaches the model slots on a model it makes itself (the
     * probes: a micro-model written at run time) opens its sessions in run
     * (gf_session_open on its own directory, the backend k->backend and ref);
     * the runner then opens none and k->session stays NULL. */
    int opens_sessions;
    /* The kind's run hashes the case's model (gf_model_hash: a golden's
     * provenance): the runner hashes each such model once in the parent
     * before the children fork, and they inherit it (hash.c's memo). */
    int hashes_model;
    int (*judges_weights)(const gf_case *c, const char *weights, const char *kv);
    /* Served backends (a backend whose info names weights GF_WEIGHTS_SERVED:
     * backends/http, an OpenAI-compatible server): its rows hold the top-k
     * log-probabilities it reported at their ids and an even remainder, never
     * full logits, and it serves its own model. NULL (or a NULL hook) when
     * case c is judged on what such a backend gives; else why not, and the
     * plan skips the pair with that reason (harness/run/plan.c). */
    const char *(*served_skip)(const gf_case *c);
};

/* gf_backend_info.weights of a served backend (backends/http/hb_info.c):
 * not a weight type, a route (docs/http.md). */
#define GF_WEIGHTS_SERVED "served"

/* The keys kind k's parse asks of a case (its own keys, the loader's common
 * ones not included), found by running it on an empty map, in the order it
 * asks them, comma-separated into buf ("" when none); the keys the kind
 * refuses (gf_y_refuse) are left out. Returns how many.
 *   GF_KEYS_ALL          every key it takes;
 *   GF_KEYS_PLAIN        the keys it reads whatever else the case holds;
 *   GF_KEYS_CONDITIONAL  the keys a reader reads only when the case names
 *                        one of them (the sampler-profile keys,
 *                        harness/kit/keys.c: such a reader asks
 *                        gf_y_census_all and reads them all when it says 1). */
typedef enum gf_kind_keys_which { GF_KEYS_ALL, GF_KEYS_PLAIN, GF_KEYS_CONDITIONAL } gf_kind_keys_which;
int gf_kind_keys(const gf_kind_def *k, gf_kind_keys_which which, char *buf, size_t cap);
/* In gf_kind_keys's second census: 1, and a reader that reads a group of
 * keys only when one of them is present reads them all. */
int gf_y_census_all(const gf_cctx *ctx);

/* The kind called name in a NULL-terminated list, or NULL. */
const gf_kind_def *gf_kind_lookup(const gf_kind_def *const *kinds, const char *name);

struct gf_case {
    char *id;
    const gf_kind_def *kind;
    char *description; /* optional */
    char **tags;
    size_t n_tags;
    char **backends; /* filter: names (or plugin paths); "!name" excludes */
    size_t n_backends;
    int has_expect_verdict;    /* a must-fail case (cases/detect/) names the verdict it */
    gf_verdict expect_verdict; /* must get: `expect_verdict: fail` (docs/cases.md) */
    char *model_arg;           /* `model` as written, NULL if none */
    char *model;               /* resolved directory, NULL if none */
    char *file;                /* the file it came from (as given) */
    int line, col;             /* where the case starts */
    size_t index;              /* order of loading */
    void *spec;                /* the kind's own parsed keys */
    json_t *tree;              /* the case as written, as JSON (gf_ynode_to_json): what
                                 the case hash is computed over (docs/goldens.md) */
};

typedef struct gf_case_set {
    const gf_kind_def *const *kinds; /* the kinds the cases were read against */
    gf_case *cases;
    size_t n;
    char **errors; /* every schema / YAML error, "FILE:LINE:COL: message" */
    size_t n_errors;
    char **files; /* files read, in order */
    size_t n_files;
} gf_case_set;

/* Load cases from files and directories, each case's kind from `kinds` (a directory: its *.yaml / *.yml
 * files, sorted, not recursing). n_paths 0: the default suite, `cases/` under
 * root. root: the repository root for relative `model` paths (NULL: found
 * from each file, see docs/cases.md). Returns GF_OK, or GF_E_FORMAT with every
 * error in set->errors (the set then holds no cases), GF_E_IO for unreadable
 * paths (also listed). */
int gf_cases_load(const gf_kind_def *const *kinds, const char *const *paths, size_t n_paths, const char *root,
                  gf_case_set *set);
void gf_case_set_free(gf_case_set *set);

/* A node tree as JSON, values resolved by the core schema: maps -> objects
 * (keys as written), sequences -> arrays, null/bool/int/float/str scalars ->
 * null/true,false/integer/real/string. A non-finite float (which JSON cannot
 * hold) becomes the object {"$float": "NaN" | "Infinity" | "-Infinity"},
 * which the canonical JSON writes as the bare token. NULL on OOM or a string
 * that is not UTF-8. New reference. */
json_t *gf_ynode_to_json(const gf_ynode *n);

/* Load one YAML text (for tests): `file` names it in messages. */
int gf_cases_load_text(const gf_kind_def *const *kinds, const char *text, size_t len, const char *file,
                       const char *root, gf_case_set *set);

/* Does the case have the tag? Does the filter admit a backend whose
 * requested name is `requested` and reported name `name`? */
int gf_case_has_tag(const gf_case *c, const char *tag);
int gf_case_backend_allowed(const gf_case *c, const char *requested, const char *name);

/* The repository root: $GENFENCE_ROOT, else the nearest ancestor of dir that
 * holds .git or CMakeLists.txt beside a cases/ folder, else (an installed
 * genfence) <exe>/../share/genfence when it has cases/, else the build's
 * source directory. Returns a malloc'd path. */
char *gf_case_find_root(const char *dir);
/* The default suite directory (root/cases). malloc'd. */
char *gf_case_default_dir(const char *root);
/* The root a case file's relative paths (model, golden) resolve against: root
 * when given, else gf_case_find_root of the file's directory. malloc'd. */
char *gf_case_root_for(const char *root, const char *file);

const char *gf_case_yaml_version(void); /* libyaml's version string */

/* ---- selecting cases (case_filter.c) ---- */

typedef struct gf_case_filter {
    void *regex;  /* compiled --filter (POSIX ERE on the id), or NULL */
    char **kinds; /* --kind: any of these kinds (none: all) */
    size_t n_kinds;
    char **tags; /* --tag: any of these tags; "!tag": none of those */
    size_t n_tags;
} gf_case_filter;

/* 0 ok; -1 with a message in err (bad regex, a kind not in `known`). kinds and tags are
 * borrowed. */
int gf_case_filter_init(gf_case_filter *f, const gf_kind_def *const *known, const char *regex, char **kinds,
                        size_t n_kinds, char **tags, size_t n_tags, char *err, size_t err_len);
int gf_case_filter_match(const gf_case_filter *f, const gf_case *c);
void gf_case_filter_free(gf_case_filter *f);

#endif
