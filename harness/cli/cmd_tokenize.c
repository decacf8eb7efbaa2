/* genfence tokenize: text -> ids, or ids -> text (one-shot or streamed). */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: genfence tokenize --tokenizer PATH (--text TEXT | --file FILE | --decode IDS |\n"
               "                         --jsonl FILE | --decode-jsonl FILE)\n"
               "                         [--special] [--json] [--stream] [--help]\n"
               "\n"
               "BPE tokenizers as tokenizer.json describes them (normalizer, pre-tokenizer,\n"
               "model, post-processor, decoder), id-for-id with Hugging Face tokenizers.\n"
               "\n"
               "  --tokenizer PATH  tokenizer.json, a directory holding it, or a directory\n"
               "                    holding vocab.json + merges.txt\n"
               "  --text TEXT       encode TEXT (UTF-8); prints the ids separated by spaces\n"
               "  --file FILE       encode the bytes of FILE ('-' for standard input)\n"
               "  --decode IDS      decode comma-separated ids (e.g. 464,2068); prints the text\n"
               "                    (invalid UTF-8 becomes U+FFFD, as Python's errors=\"replace\")\n"
               "  --jsonl FILE      encode each line of FILE, a JSON string; prints one JSON array\n"
               "                    of ids per line ({\"error\": ...} for a line that fails)\n"
               "  --decode-jsonl FILE  decode each line of FILE, a JSON array of ids; prints\n"
               "                    {\"text\": ...} (or {\"error\": ...}) per line\n"
               "  --special         encode with the post-processor's special tokens (e.g. a BOS),\n"
               "                    as Hugging Face's encode(text) does by default; without it,\n"
               "                    encode(text, add_special_tokens=False)\n"
               "  --stream          with --decode: decode token by token through the incremental\n"
               "                    UTF-8 decoder, writing each chunk as soon as it is complete\n"
               "  --json            encode: a JSON array of ids; decode: {\"text\": ...}; with\n"
               "                    --stream also \"chunks\" (stream output after each token),\n"
               "                    \"tail\" (the final flush) and \"pieces\" (each token decoded alone)\n"
               "  --help            this text\n"
               "\n"
               "exit status: 0 ok, 2 bad usage, bad tokenizer or bad input\n");
}

static int read_all(const char *path, char **buf_out, size_t *len_out)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        gf_cli_error("cannot open '%s': %s", path, strerror(errno));
        return 0;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            gf_cli_error("out of memory reading '%s'", path);
            break;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (len < cap) {
            if (ferror(f)) {
                gf_cli_error("error reading '%s'", path);
                free(buf);
                buf = NULL;
            }
            break;
        }
        char *nb = realloc(buf, cap *= 2);
        if (!nb)
            free(buf);
        buf = nb;
    }
    if (f != stdin)
        fclose(f);
    if (!buf)
        return 0;
    *buf_out = buf;
    *len_out = len;
    return 1;
}

static int g_special; /* --special: add_special_tokens */

static int do_encode(const gf_tokenizer *tok, const char *text, size_t len, int json)
{
    int32_t *ids;
    size_t n;
    if (gf_tokenizer_encode_ex(tok, text, len, g_special, &ids, &n) != GF_OK) {
        gf_cli_error("%s", gf_error_msg());
        return GF_EXIT_USAGE;
    }
    if (json)
        putchar('[');
    for (size_t i = 0; i < n; i++)
        printf("%s%d", i ? (json ? ", " : " ") : "", ids[i]);
    puts(json ? "]" : "");
    free(ids);
    return GF_EXIT_OK;
}

/* Decode each token alone and through the stream; JSON or plain streaming. */
static int do_stream(const gf_tokenizer *tok, const int32_t *ids, size_t n, int json)
{
    char **chunks = calloc(n ? n : 1, sizeof *chunks), **pieces = calloc(n ? n : 1, sizeof *pieces);
    size_t *chunk_len = calloc(n ? n : 1, sizeof *chunk_len);
    size_t *piece_len = calloc(n ? n : 1, sizeof *piece_len);
    int rc = GF_EXIT_OK;
    if (!chunks || !pieces || !chunk_len || !piece_len) {
        gf_cli_error("out of memory");
        rc = GF_EXIT_USAGE;
        goto out;
    }
    gf_utf8_stream s;
    gf_utf8_stream_init(&s);
    for (size_t i = 0; i < n; i++) {
        size_t bl;
        const uint8_t *b = gf_tokenizer_token_bytes(tok, ids[i], &bl);
        if (!b) {
            gf_cli_error("token id %d (at index %zu) is not in the vocabulary (size %d)", ids[i], i,
                         gf_tokenizer_vocab_size(tok));
            rc = GF_EXIT_USAGE;
            goto out;
        }
        size_t cap = 3 * (bl + 4) + 1;
        if (!(chunks[i] = malloc(cap))) {
            gf_cli_error("out of memory");
            rc = GF_EXIT_USAGE;
            goto out;
        }
        chunk_len[i] = gf_utf8_stream_feed(&s, b, bl, chunks[i], cap);
        if (!json) {
            fwrite(chunks[i], 1, chunk_len[i], stdout);
            fflush(stdout);
        } else if (gf_tokenizer_decode(tok, &ids[i], 1, &pieces[i], &piece_len[i]) != GF_OK) {
            gf_cli_error("%s", gf_error_msg());
            rc = GF_EXIT_USAGE;
            goto out;
        }
    }
    char tail[16];
    size_t tail_len = gf_utf8_stream_finish(&s, tail, sizeof tail);
    if (!json) {
        fwrite(tail, 1, tail_len, stdout);
        putchar('\n');
        goto out;
    }
    char *text;
    size_t text_len;
    if (gf_tokenizer_decode(tok, ids, n, &text, &text_len) != GF_OK) {
        gf_cli_error("%s", gf_error_msg());
        rc = GF_EXIT_USAGE;
        goto out;
    }
    fputs("{\"text\": ", stdout);
    gf_json_write_string(stdout, text, text_len);
    fputs(", \"chunks\": [", stdout);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ", " : "", stdout);
        gf_json_write_string(stdout, chunks[i], chunk_len[i]);
    }
    fputs("], \"tail\": ", stdout);
    gf_json_write_string(stdout, tail, tail_len);
    fputs(", \"pieces\": [", stdout);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ", " : "", stdout);
        gf_json_write_string(stdout, pieces[i], piece_len[i]);
    }
    puts("]}");
    free(text);
out:
    for (size_t i = 0; chunks && pieces && i < n; i++) {
        free(chunks[i]);
        free(pieces[i]);
    }
    free(chunks);
    free(pieces);
    free(chunk_len);
    free(piece_len);
    return rc;
}

static int do_decode(const gf_tokenizer *tok, const char *list, int json, int stream)
{
    int32_t *ids = NULL;
    size_t n = 0;
    if (list[strspn(list, " ")] == '\0') /* an empty list decodes to "" */
        ids = malloc(sizeof *ids);
    else if (gf_parse_ids(list, &ids, &n) != GF_OK) {
        gf_cli_error("%s", gf_error_msg());
        return GF_EXIT_USAGE;
    }
    int rc = GF_EXIT_OK;
    if (stream) {
        rc = do_stream(tok, ids, n, json);
    } else {
        char *text;
        size_t len;
        if (gf_tokenizer_decode(tok, ids, n, &text, &len) != GF_OK) {
            gf_cli_error("%s", gf_error_msg());
            rc = GF_EXIT_USAGE;
        } else {
            if (json) {
                fputs("{\"text\": ", stdout);
                gf_json_write_string(stdout, text, len);
                puts("}");
            } else {
                fwrite(text, 1, len, stdout);
                putchar('\n');
            }
            free(text);
        }
    }
    free(ids);
    return rc;
}

static void print_error_line(const char *msg)
{
    fputs("{\"error\": ", stdout);
    gf_json_write_string(stdout, msg, strlen(msg));
    puts("}");
}

/* One JSON value per line of FILE: a string to encode, or (decode) an array
 * of ids; one output line each. Exit 2 when a line failed (its output line
 * says why), after all of them. */
static int do_jsonl(const gf_tokenizer *tok, const char *path, int decode)
{
    char *buf;
    size_t len;
    if (!read_all(path, &buf, &len))
        return GF_EXIT_USAGE;
    int rc = GF_EXIT_OK;
    size_t line_no = 0;
    for (size_t pos = 0; pos < len;) {
        char *line = buf + pos, *nl = memchr(line, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - line) : len - pos;
        pos += ll + (nl != NULL);
        line_no++;
        if (ll == 0)
            continue;
        json_error_t je;
        json_t *v = json_loadb(line, ll, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        char msg[512];
        if (!v || (!decode && !json_is_string(v)) || (decode && !json_is_array(v))) {
            snprintf(msg, sizeof msg, "%s: line %zu: expected a JSON %s", path, line_no,
                     decode ? "array of ids" : "string");
            print_error_line(msg);
            json_decref(v);
            rc = GF_EXIT_USAGE;
            continue;
        }
        if (!decode) {
            int32_t *ids;
            size_t n;
            if (gf_tokenizer_encode_ex(tok, json_string_value(v), json_string_length(v), g_special, &ids, &n) !=
                GF_OK) {
                print_error_line(gf_error_msg());
                rc = GF_EXIT_USAGE;
            } else {
                putchar('[');
                for (size_t i = 0; i < n; i++)
                    printf("%s%d", i ? ", " : "", ids[i]);
                puts("]");
                free(ids);
            }
            json_decref(v);
            continue;
        }
        size_t n = json_array_size(v);
        int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
        int ok = ids != NULL;
        for (size_t i = 0; ok && i < n; i++) {
            json_t *e = json_array_get(v, i);
            ok = json_is_integer(e) && json_integer_value(e) >= INT32_MIN && json_integer_value(e) <= INT32_MAX;
            if (ok)
                ids[i] = (int32_t)json_integer_value(e);
        }
        char *text;
        size_t tl;
        if (!ok) {
            snprintf(msg, sizeof msg, "%s: line %zu: expected a JSON array of ids", path, line_no);
            print_error_line(msg);
            rc = GF_EXIT_USAGE;
        } else if (gf_tokenizer_decode(tok, ids, n, &text, &tl) != GF_OK) {
            print_error_line(gf_error_msg());
            rc = GF_EXIT_USAGE;
        } else {
            fputs("{\"text\": ", stdout);
            gf_json_write_string(stdout, text, tl);
            puts("}");
            free(text);
        }
        free(ids);
        json_decref(v);
    }
    free(buf);
    return rc;
}

int gf_cmd_tokenize(int argc, char **argv)
{
    static const struct option longopts[] = {{"tokenizer", required_argument, 0, 't'},
                                             {"text", required_argument, 0, 'x'},
                                             {"file", required_argument, 0, 'f'},
                                             {"decode", required_argument, 0, 'd'},
                                             {"jsonl", required_argument, 0, 'l'},
                                             {"decode-jsonl", required_argument, 0, 'L'},
                                             {"special", no_argument, 0, 'p'},
                                             {"json", no_argument, 0, 'j'},
                                             {"stream", no_argument, 0, 's'},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    const char *tok_path = NULL, *text = NULL, *file = NULL, *decode = NULL, *jsonl = NULL, *decode_jsonl = NULL;
    g_special = 0;
    int json = 0, stream = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 't': tok_path = optarg; break;
        case 'x': text = optarg; break;
        case 'f': file = optarg; break;
        case 'd': decode = optarg; break;
        case 'l': jsonl = optarg; break;
        case 'L': decode_jsonl = optarg; break;
        case 'p': g_special = 1; break;
        case 'j': json = 1; break;
        case 's': stream = 1; break;
        case 'h': usage(stdout); return GF_EXIT_OK;
        case ':':
            gf_cli_error("option '%s' needs a value", argv[optind - 1]);
            usage(stderr);
            return GF_EXIT_USAGE;
        default:
            gf_cli_error("unknown option '%s'", argv[optind - 1]);
            usage(stderr);
            return GF_EXIT_USAGE;
        }
    }
    const char *why = NULL;
    if (optind < argc)
        why = "unexpected argument";
    else if (!tok_path)
        why = "--tokenizer is required";
    else if ((text != NULL) + (file != NULL) + (decode != NULL) + (jsonl != NULL) + (decode_jsonl != NULL) != 1)
        why = "give exactly one of --text, --file, --decode, --jsonl, --decode-jsonl";
    else if (stream && !decode)
        why = "--stream goes with --decode";
    if (why) {
        if (optind < argc)
            gf_cli_error("%s '%s'", why, argv[optind]);
        else
            gf_cli_error("%s", why);
        usage(stderr);
        return GF_EXIT_USAGE;
    }

    gf_tokenizer *tok;
    if (gf_tokenizer_load(tok_path, &tok) != GF_OK) {
        gf_cli_error("%s", gf_error_msg());
        return GF_EXIT_USAGE;
    }
    int rc;
    if (jsonl || decode_jsonl) {
        rc = do_jsonl(tok, jsonl ? jsonl : decode_jsonl, decode_jsonl != NULL);
    } else if (decode) {
        rc = do_decode(tok, decode, json, stream);
    } else if (text) {
        rc = do_encode(tok, text, strlen(text), json);
    } else {
        char *buf;
        size_t len;
        rc = GF_EXIT_USAGE;
        if (read_all(file, &buf, &len)) {
            rc = do_encode(tok, buf, len, json);
            free(buf);
        }
    }
    gf_tokenizer_free(tok);
    return rc;
}
