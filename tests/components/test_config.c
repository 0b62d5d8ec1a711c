/* test_config.c — the strict YAML reader: located nodes, refused
 * constructs, limits, collected errors, strict scalars, merge */
#include "config.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

/* One parse with its own context and error list, owned by the test case
 * (T_OWN) so that an early return frees it. */
struct fixture {
    struct kb_config_errors e;
    struct kb_config c;
    struct kb_config_node *root;
};

static void done(struct fixture *f)
{
    kb_config_release(&f->c);
    kb_config_errors_release(&f->e);
    free(f);
}

/* An empty context (NULL when out of memory). */
static struct fixture *fixture_new(void)
{
    struct fixture *f = T_OWN(calloc(1, sizeof *f), done);
    if (f) {
        kb_config_errors_init(&f->e);
        kb_config_init(&f->c, &f->e);
    }
    return f;
}

static struct fixture *parse(const char *text)
{
    struct fixture *f = fixture_new();
    if (f)
        f->root = kb_config_parse_string(&f->c, "t.yaml", text, strlen(text));
    return f;
}

/* The error list as one newline-separated string, for exact comparison. */
static const char *errors(struct fixture *f)
{
    static char buf[4096];
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; i < f->e.n; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? "\n" : "",
                                f->e.msgs[i]);
    return buf;
}

TEST(parses_with_locations)
{
    struct fixture *f;
    ASSERT_TRUE((f = parse("a: 1\nb:\n  c: [x, 'y']\n  d: true\n")) && f->root);
    ASSERT_STREQ(errors(f), "");
    ASSERT_TRUE(f->root && f->root->kind == KB_CONFIG_MAP);
    ASSERT_EQ(f->root->n, 2);
    struct kb_config_node *c = kb_config_lookup(f->root, "b.c");
    ASSERT_TRUE(c && c->kind == KB_CONFIG_SEQ);
    ASSERT_EQ(c->n, 2);
    ASSERT_EQ(c->line, 3);
    ASSERT_EQ(c->col, 6);
    ASSERT_EQ(c->key_line, 3);
    ASSERT_EQ(c->key_col, 3);
    ASSERT_STREQ(c->kids[1]->text, "y");
    ASSERT_TRUE(c->kids[1]->quoted);
    ASSERT_TRUE(!c->kids[0]->quoted);
    struct kb_config_node *d = kb_config_lookup(f->root, "b.d");
    ASSERT_EQ(d->line, 4);
    ASSERT_EQ(d->col, 6);
    ASSERT_STREQ(d->file, "t.yaml");
    ASSERT_TRUE(kb_config_lookup(f->root, "b.e") == NULL);
    T_FREE(done, f);
}

TEST(empty_document_is_empty_map)
{
    struct fixture *f;
    ASSERT_TRUE((f = parse("# nothing here\n")) && f->root);
    ASSERT_STREQ(errors(f), "");
    ASSERT_TRUE(f->root && f->root->kind == KB_CONFIG_MAP && f->root->n == 0);
    T_FREE(done, f);
}

TEST(duplicate_key)
{
    struct fixture *f;
    ASSERT_TRUE((f = parse("a: 1\nb:\n  x: 1\n  x: 2\na: 3\n")) && f->root);
    ASSERT_STREQ(errors(f), "t.yaml:4:3: duplicate key 'x' (first at 3:3)\n"
                             "t.yaml:5:1: duplicate key 'a' (first at 1:1)");
    /* the first one stays */
    ASSERT_STREQ(kb_config_get(f->root, "a")->text, "1");
    ASSERT_EQ(f->root->n, 2);
    T_FREE(done, f);
}

TEST(duplicate_key_in_flow_map)
{
    struct fixture *f;
    ASSERT_TRUE((f = parse("{a: 1, b: 2, a: 3, a: 4}")) && f->root);
    ASSERT_STREQ(errors(f), "t.yaml:1:14: duplicate key 'a' (first at 1:2)\n"
                             "t.yaml:1:20: duplicate key 'a' (first at 1:2)");
    T_FREE(done, f);
}

TEST(anchors_aliases_tags_refused)
{
    struct fixture *f;
    ASSERT_TRUE((f = parse("a: &x 1\nb: *x\nc: !!str 5\n")) && f->root);
    ASSERT_STREQ(errors(f), "t.yaml:1:4: anchors ('&x') are not supported\n"
                             "t.yaml:2:4: aliases ('*x') are not supported\n"
                             "t.yaml:3:4: tags ('!!str') are not supported");
    T_FREE(done, f);
}

TEST(complex_key_refused)
{
    struct fixture *f;
    ASSERT_TRUE((f = parse("? [a, b]\n: 1\nc: 2\n")) && f->root);
    ASSERT_STREQ(errors(f), "t.yaml:1:3: a sequence as a key is not supported");
    ASSERT_EQ(f->root->n, 1);
    ASSERT_STREQ(kb_config_get(f->root, "c")->text, "2");
    T_FREE(done, f);
}

TEST(multiple_documents_refused)
{
    struct fixture *f;
    ASSERT_TRUE((f = parse("a: 1\n---\nb: 2\n")));
    ASSERT_STREQ(errors(f), "t.yaml:2:1: multiple documents are not supported");
    ASSERT_TRUE(f->root == NULL);
    T_FREE(done, f);
}

TEST(syntax_error_located)
{
    struct fixture *f;
    ASSERT_TRUE((f = parse("a:\n  b: 1\n c: 2\n")));
    ASSERT_STREQ(errors(f),
                 "t.yaml:3:2: did not find expected key (while parsing a block mapping at 1:1)");
    ASSERT_TRUE(f->root == NULL);
    T_FREE(done, f);
}

TEST(depth_limit)
{
    char text[200];
    memset(text, '[', 70);
    text[70] = 0;
    struct fixture *f;
    ASSERT_TRUE((f = parse(text)));
    ASSERT_STREQ(errors(f), "t.yaml:1:65: nesting deeper than 64 levels");
    ASSERT_TRUE(f->root == NULL);
    T_FREE(done, f);
    /* exactly at the limit is fine */
    memset(text, '[', 64);
    memset(text + 64, ']', 64);
    text[128] = 0;
    ASSERT_TRUE((f = parse(text)) && f->root);
    ASSERT_STREQ(errors(f), "");
    T_FREE(done, f);
}

TEST(size_limit_string)
{
    size_t n = KB_CONFIG_MAX_BYTES + 1;
    char *big = T_OWN(malloc(n + 1), free);
    ASSERT_TRUE(big);
    memset(big, ' ', n);
    big[n] = 0;
    struct fixture *f;
    ASSERT_TRUE((f = parse(big)));
    ASSERT_STREQ(errors(f), "t.yaml:1:1: file too large: 4194305 bytes, the limit is 4194304");
    ASSERT_TRUE(f->root == NULL);
    T_FREE(done, f);
    T_FREE(free, big);
}

TEST(size_limit_file)
{
    static const char pad[] =
        "# padding padding padding padding padding padding padding padding\n";
    size_t n = sizeof "a: 1\n" - 1 + 1000 * (sizeof pad - 1);
    char *text = T_OWN(malloc(n + 1), free);
    ASSERT_TRUE(text);
    char *at = text + sprintf(text, "a: 1\n");
    for (int i = 0; i < 1000; i++)
        at += sprintf(at, "%s", pad);
    char *path = T_OWN(test_tmpfile("kbsim_test_config", text), test_remove_file);
    ASSERT_TRUE(path);
    T_FREE(free, text);
    struct fixture *f = fixture_new();
    ASSERT_TRUE(f);
    f->c.max_bytes = 1024;
    ASSERT_TRUE(kb_config_parse_file(&f->c, path) == NULL);
    ASSERT_EQ(f->e.n, 1);
    ASSERT_CONTAINS(errors(f), ":1:1: file too large: ");
    ASSERT_CONTAINS(errors(f), "bytes, the limit is 1024");
    f->c.max_bytes = KB_CONFIG_MAX_BYTES;
    struct kb_config_node *root = kb_config_parse_file(&f->c, path);
    ASSERT_TRUE(root != NULL);
    ASSERT_STREQ(kb_config_get(root, "a")->text, "1");
    T_FREE(done, f);
    T_FREE(test_remove_file, path);
}

TEST(missing_file)
{
    struct fixture *f = fixture_new();
    ASSERT_TRUE(f);
    ASSERT_TRUE(kb_config_parse_file(&f->c, "/nonexistent/x.yaml") == NULL);
    ASSERT_STREQ(errors(f), "/nonexistent/x.yaml: cannot open: No such file or directory");
    T_FREE(done, f);
}

TEST(errors_capped)
{
    struct fixture *f = fixture_new();
    ASSERT_TRUE(f);
    for (int i = 0; i < 500; i++)
        kb_config_errors_add(&f->e, "problem %d", i);
    /* out of memory, the list ends at "out of memory" instead */
    ASSERT_STREQ(f->e.msgs[f->e.n - 1], "too many errors, stopped after 100");
    ASSERT_EQ(f->e.n, KB_CONFIG_MAX_ERRORS + 1);
    T_FREE(done, f);
}

/* Read "v: <text>" and convert with each helper. */
TEST(strict_integers)
{
    static const struct {
        const char *text;
        bool ok;
        int64_t v;
    } cases[] = {
        {"0", true, 0},       {"42", true, 42},     {"-7", true, -7},
        {"010", false, 0},    {"0x10", false, 0},   {"1.0", false, 0},
        {"1e3", false, 0},    {"+5", false, 0},     {"\"5\"", false, 0},
        {"", false, 0},       {"fast", false, 0},   {"9223372036854775807", true, INT64_MAX},
        {"9223372036854775808", false, 0},          {"-9223372036854775808", true, INT64_MIN},
        {"16MiB", false, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[64];
        snprintf(text, sizeof text, "v: %s\n", cases[i].text);
        struct fixture *f;
        ASSERT_TRUE((f = parse(text)) && f->root);
        int64_t v = -1;
        bool ok = kb_config_to_int(&f->c, kb_config_get(f->root, "v"), "v", &v);
        if (ok != cases[i].ok)
            fprintf(stderr, "case '%s'\n", cases[i].text);
        ASSERT_EQ(ok, cases[i].ok);
        if (ok)
            ASSERT_EQ(v, cases[i].v);
        T_FREE(done, f);
    }
    struct fixture *f;
    ASSERT_TRUE((f = parse("n_slots: fast\nq: \"8\"\nm:\nbig: 99999999999999999999\n")) && f->root);
    int64_t v;
    kb_config_to_int(&f->c, kb_config_get(f->root, "n_slots"), "n_slots", &v);
    kb_config_to_int(&f->c, kb_config_get(f->root, "q"), "q", &v);
    kb_config_to_int(&f->c, kb_config_get(f->root, "m"), "m", &v);
    kb_config_to_int(&f->c, kb_config_get(f->root, "big"), "big", &v);
    ASSERT_STREQ(errors(f),
                 "t.yaml:1:10: expected an integer for 'n_slots', got 'fast'\n"
                 "t.yaml:2:4: expected an integer for 'q', got \"8\"\n"
                 "t.yaml:3:3: expected an integer for 'm', got nothing\n"
                 "t.yaml:4:6: expected an integer for 'big', got '99999999999999999999' "
                 "(out of range)");
    T_FREE(done, f);
}

TEST(strict_byte_sizes)
{
    static const struct {
        const char *text;
        bool ok;
        uint64_t v;
    } cases[] = {
        {"4096", true, 4096},
        {"256B", true, 256},
        {"16MiB", true, 16u << 20},
        {"16 MiB", true, 16u << 20},
        {"2GiB", true, 2ull << 30},
        {"1TiB", true, 1ull << 40},
        {"4KiB", true, 4096},
        {"16MB", false, 0},
        {"16  MiB", false, 0},
        {"16mib", false, 0},
        {"-1", false, 0},
        {"1.5GiB", false, 0},
        {"20000000TiB", false, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[64];
        snprintf(text, sizeof text, "v: '%s'\nw: %s\n", cases[i].text, cases[i].text);
        struct fixture *f;
        ASSERT_TRUE((f = parse(text)) && f->root);
        uint64_t v = 0;
        /* quoted: always a string */
        ASSERT_TRUE(!kb_config_to_bytes(&f->c, kb_config_get(f->root, "v"), "v", &v));
        bool ok = kb_config_to_bytes(&f->c, kb_config_get(f->root, "w"), "w", &v);
        if (ok != cases[i].ok)
            fprintf(stderr, "case '%s'\n", cases[i].text);
        ASSERT_EQ(ok, cases[i].ok);
        if (ok)
            ASSERT_U64_EQ(v, cases[i].v);
        T_FREE(done, f);
    }
    struct fixture *f;
    ASSERT_TRUE((f = parse("capacity: 16MB\nsize: big\n")) && f->root);
    uint64_t v;
    kb_config_to_bytes(&f->c, kb_config_get(f->root, "capacity"), "capacity", &v);
    kb_config_to_bytes(&f->c, kb_config_get(f->root, "size"), "size", &v);
    ASSERT_STREQ(errors(f),
                 "t.yaml:1:11: expected a byte size for 'capacity', got '16MB' "
                 "(decimal units are ambiguous: use KiB, MiB, GiB or TiB)\n"
                 "t.yaml:2:7: expected a byte size for 'size', got 'big' "
                 "(an integer, optionally with B, KiB, MiB, GiB or TiB)");
    T_FREE(done, f);
}

TEST(strict_floats)
{
    static const struct {
        const char *text;
        bool ok;
        double v;
    } cases[] = {
        {"1", true, 1},       {"0.1", true, 0.1},  {"-2.5", true, -2.5}, {"1e3", true, 1000},
        {"1.5E-2", true, 0.015}, {".5", true, 0.5}, {"5.", true, 5},    {"+3", true, 3},
        {"inf", false, 0},    {".inf", false, 0},  {"nan", false, 0},   {"0x1p3", false, 0},
        {"1e", false, 0},     {"e5", false, 0},    {"1e999", false, 0}, {"fast", false, 0},
        {"1,5", false, 0},    {".", false, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[64];
        snprintf(text, sizeof text, "v: %s\n", cases[i].text);
        struct fixture *f;
        ASSERT_TRUE((f = parse(text)) && f->root);
        double v = -1;
        bool ok = kb_config_to_double(&f->c, kb_config_get(f->root, "v"), "v", &v);
        if (ok != cases[i].ok)
            fprintf(stderr, "case '%s'\n", cases[i].text);
        ASSERT_EQ(ok, cases[i].ok);
        if (ok)
            ASSERT_NEAR(v, cases[i].v, 1e-12);
        T_FREE(done, f);
    }
    struct fixture *f;
    ASSERT_TRUE((f = parse("noc:\n  bandwidth_gbps: fast\n")) && f->root);
    double v;
    kb_config_to_double(&f->c, kb_config_lookup(f->root, "noc.bandwidth_gbps"), "bandwidth_gbps",
                        &v);
    ASSERT_STREQ(errors(f), "t.yaml:2:19: expected a number for 'bandwidth_gbps', got 'fast'");
    T_FREE(done, f);
}

TEST(strict_booleans_and_strings)
{
    struct fixture *f;
    ASSERT_TRUE((f = parse("a: true\nb: false\nc: yes\nd: True\ne: 'true'\ns: name\nt: ''\nu: ~\nm: {x: 1}\n")) && f->root);
    bool b = false;
    ASSERT_TRUE(kb_config_to_bool(&f->c, kb_config_get(f->root, "a"), "a", &b) && b);
    ASSERT_TRUE(kb_config_to_bool(&f->c, kb_config_get(f->root, "b"), "b", &b) && !b);
    ASSERT_TRUE(!kb_config_to_bool(&f->c, kb_config_get(f->root, "c"), "c", &b));
    ASSERT_TRUE(!kb_config_to_bool(&f->c, kb_config_get(f->root, "d"), "d", &b));
    ASSERT_TRUE(!kb_config_to_bool(&f->c, kb_config_get(f->root, "e"), "e", &b));
    const char *s = NULL;
    ASSERT_TRUE(kb_config_to_string(&f->c, kb_config_get(f->root, "s"), "s", &s));
    ASSERT_STREQ(s, "name");
    ASSERT_TRUE(kb_config_to_string(&f->c, kb_config_get(f->root, "t"), "t", &s));
    ASSERT_STREQ(s, "");
    ASSERT_TRUE(!kb_config_to_string(&f->c, kb_config_get(f->root, "u"), "u", &s));
    ASSERT_TRUE(!kb_config_to_string(&f->c, kb_config_get(f->root, "m"), "m", &s));
    ASSERT_STREQ(errors(f), "t.yaml:3:4: expected true or false for 'c', got 'yes'\n"
                             "t.yaml:4:4: expected true or false for 'd', got 'True'\n"
                             "t.yaml:5:4: expected true or false for 'e', got \"true\"\n"
                             "t.yaml:8:4: expected a string for 'u', got '~'\n"
                             "t.yaml:9:4: expected a string for 'm', got a mapping");
    T_FREE(done, f);
}

TEST(merge_user_over_defaults)
{
    struct fixture *f = fixture_new();
    ASSERT_TRUE(f);
    struct kb_config *c = &f->c;
    const char *def = "a: 1\nb:\n  x: 1\n  y: 2\nl: [1, 2]\n";
    const char *user = "b:\n  y: 20\n  z: 30\nl: [3]\nn: new\n";
    struct kb_config_node *base = kb_config_parse_string(c, "def.yaml", def, strlen(def));
    struct kb_config_node *over = kb_config_parse_string(c, "user.yaml", user, strlen(user));
    struct kb_config_node *m = kb_config_merge(c, base, over);
    ASSERT_STREQ(errors(f), "");
    ASSERT_TRUE(base && over);
    ASSERT_STREQ(kb_config_lookup(m, "a")->text, "1");
    ASSERT_STREQ(kb_config_lookup(m, "a")->file, "def.yaml");
    ASSERT_STREQ(kb_config_lookup(m, "b.x")->text, "1");
    ASSERT_STREQ(kb_config_lookup(m, "b.y")->text, "20");
    ASSERT_STREQ(kb_config_lookup(m, "b.y")->file, "user.yaml");
    ASSERT_EQ(kb_config_lookup(m, "b.y")->line, 2);
    ASSERT_STREQ(kb_config_lookup(m, "b.z")->text, "30");
    ASSERT_EQ(kb_config_lookup(m, "l")->n, 1); /* sequences are replaced */
    ASSERT_STREQ(kb_config_lookup(m, "n")->text, "new");
    T_FREE(done, f);
}

TEST(edit_distance)
{
    ASSERT_EQ(kb_config_edit_distance("", ""), 0);
    ASSERT_EQ(kb_config_edit_distance("count", "count"), 0);
    ASSERT_EQ(kb_config_edit_distance("cuont", "count"), 1);
    ASSERT_EQ(kb_config_edit_distance("bandwith", "bandwidth"), 1);
    ASSERT_EQ(kb_config_edit_distance("kitten", "sitting"), 3);
    ASSERT_EQ(kb_config_edit_distance("", "abc"), 3);
}

TEST_MAIN(parses_with_locations, empty_document_is_empty_map, duplicate_key,
          duplicate_key_in_flow_map, anchors_aliases_tags_refused, complex_key_refused,
          multiple_documents_refused, syntax_error_located, depth_limit, size_limit_string,
          size_limit_file, missing_file, errors_capped, strict_integers, strict_byte_sizes,
          strict_floats, strict_booleans_and_strings, merge_user_over_defaults, edit_distance)
