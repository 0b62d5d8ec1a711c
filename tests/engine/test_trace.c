/* test_trace.c — the trace recorder: exact JSON, escaping, tracks, life cycle */
#include "sim.h"
#include "test.h"
#include "trace.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static char *slurp_path(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    char *b = test_slurp(f);
    fclose(f);
    return b;
}

static const char tiny_json[] =
    "{\"traceEvents\":[\n"
    "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"sip0\"}},\n"
    "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":1}},\n"
    "{\"ph\":\"M\",\"pid\":1,\"tid\":1,\"name\":\"thread_name\",\"args\":{\"name\":\"cube0.pe0\"}},\n"
    "{\"ph\":\"M\",\"pid\":1,\"tid\":1,\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":1}},\n"
    "{\"ph\":\"M\",\"pid\":2,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"system\"}},\n"
    "{\"ph\":\"M\",\"pid\":2,\"tid\":0,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":2}},\n"
    "{\"ph\":\"M\",\"pid\":2,\"tid\":2,\"name\":\"thread_name\",\"args\":{\"name\":\"link\"}},\n"
    "{\"ph\":\"M\",\"pid\":2,\"tid\":2,\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":2}},\n"
    "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":0.001500,\"dur\":2.000001,\"cat\":\"kernel\",\"name\":\"ring\"},\n"
    "{\"ph\":\"X\",\"pid\":2,\"tid\":2,\"ts\":3.000000,\"dur\":0.000000,\"cat\":\"link\",\"name\":\"4096 B\","
    "\"args\":{\"bytes\":4096,\"to\":\"pe1\"}},\n"
    "{\"ph\":\"i\",\"pid\":1,\"tid\":1,\"s\":\"t\",\"ts\":1000.000000,\"cat\":\"ipcq\",\"name\":\"credit\"},\n"
    "{\"ph\":\"C\",\"pid\":2,\"tid\":2,\"ts\":0.000007,\"name\":\"busy\",\"args\":{\"value\":0.5}}\n"
    "],\"displayTimeUnit\":\"ns\"}\n";

TEST(tiny_trace_exact_json)
{
    /* the stream first: the harness frees newest first, and sim_free
     * writes the end of a trace left open */
    FILE *f = T_OWN(tmpfile(), test_fclose);
    ASSERT_TRUE(f);
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    char err[256];
    ASSERT_EQ(sim_trace_open_file(s, f, "tiny", err, sizeof err), 0);
    struct sim_trace *t = sim_tracer(s);
    ASSERT_TRUE(t);
    int pe = sim_trace_track_path(t, "sip0.cube0.pe0");
    int link = sim_trace_track_path(t, "link");
    ASSERT_EQ(pe, 0);
    ASSERT_EQ(link, 1);
    /* the same names give the same tracks, no new metadata */
    ASSERT_EQ(sim_trace_track(t, "sip0", "cube0.pe0"), pe);
    ASSERT_EQ(sim_trace_track_path(t, "link"), link);
    sim_trace_span(t, pe, "kernel", "ring", 1500, 2001501, NULL, 0);
    struct sim_trace_arg a[] = {{"bytes", NULL, 4096}, {"to", "pe1", 0}};
    sim_trace_span(t, link, "link", "4096 B", 3 * SIM_US, 3 * SIM_US, a, 2);
    sim_trace_instant(t, pe, "ipcq", "credit", SIM_MS, NULL, 0);
    sim_trace_counter(t, link, "busy", 7, 0.5);
    sim_trace_counter(t, link, "busy", 8, 0.0 / 0.0); /* not recorded */
    ASSERT_U64_EQ(sim_trace_events(t), 12);
    ASSERT_EQ(sim_trace_close(s, err, sizeof err), 0);
    char *got = T_OWN(test_slurp(f), free);
    ASSERT_TRUE(got);
    ASSERT_STREQ(got, tiny_json);
    T_FREE(free, got);
    /* closed: further records and a second close do nothing */
    sim_trace_span(t, pe, "kernel", "late", 0, 1, NULL, 0);
    ASSERT_EQ(sim_trace_close(s, err, sizeof err), 0);
    ASSERT_U64_EQ(sim_trace_events(t), 12);
    T_FREE(sim_free, s);
    T_FREE(test_fclose, f);
}

TEST(paused_trace_drops_records)
{
    FILE *f = T_OWN(tmpfile(), test_fclose);
    ASSERT_TRUE(f);
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    char err[256];
    ASSERT_EQ(sim_trace_open_file(s, f, "paused", err, sizeof err), 0);
    struct sim_trace *t = sim_tracer(s);
    int pe = sim_trace_track_path(t, "sip0.cube0.pe0");
    ASSERT_EQ(pe, 0); /* -1: a track could not be made (allocation failure) */
    ASSERT_TRUE(!sim_trace_paused(t));
    sim_trace_span(t, pe, "kernel", "first", 0, 1, NULL, 0);
    uint64_t before = sim_trace_events(t);
    sim_trace_pause(t, true);
    ASSERT_TRUE(sim_trace_paused(t));
    sim_trace_span(t, pe, "kernel", "dropped", 2, 3, NULL, 0);
    sim_trace_instant(t, pe, "ipcq", "dropped", 2, NULL, 0);
    sim_trace_counter(t, pe, "dropped", 2, 1.0);
    ASSERT_U64_EQ(sim_trace_events(t), before);
    sim_trace_pause(t, false);
    sim_trace_span(t, pe, "kernel", "third", 4, 5, NULL, 0);
    ASSERT_U64_EQ(sim_trace_events(t), before + 1);
    ASSERT_EQ(sim_trace_close(s, err, sizeof err), 0);
    char *got = T_OWN(test_slurp(f), free);
    ASSERT_TRUE(got);
    ASSERT_TRUE(strstr(got, "\"first\"") && strstr(got, "\"third\"") &&
                !strstr(got, "dropped"));
    T_FREE(free, got);
    T_FREE(sim_free, s);
    T_FREE(test_fclose, f);
}

TEST(escaping)
{
    /* the stream first: the harness frees newest first, and sim_free
     * writes the end of a trace left open */
    FILE *f = T_OWN(tmpfile(), test_fclose);
    ASSERT_TRUE(f);
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    ASSERT_EQ(sim_trace_open_file(s, f, "esc", NULL, 0), 0);
    struct sim_trace *t = sim_tracer(s);
    int k = sim_trace_track(t, "p\"q", "a\\b");
    /* quote, backslash, newline, tab, a control byte, valid UTF-8 (µ),
     * an invalid byte and a truncated sequence */
    sim_trace_span(t, k, "c", "x\"y\\z\n\t\x01 \xc2\xb5 \xff \xe2\x82", 0, 1000,
                   NULL, 0);
    struct sim_trace_arg a = {"k\"", "v\x1f", 0};
    sim_trace_instant(t, k, "c", "i", 0, &a, 1);
    ASSERT_EQ(sim_trace_close(s, NULL, 0), 0);
    char *got = T_OWN(test_slurp(f), free);
    ASSERT_TRUE(got);
    ASSERT_TRUE(strstr(got, "\"args\":{\"name\":\"p\\\"q\"}"));
    ASSERT_TRUE(strstr(got, "\"args\":{\"name\":\"a\\\\b\"}"));
    ASSERT_TRUE(strstr(got, "\"name\":\"x\\\"y\\\\z\\u000a\\u0009\\u0001 \xc2\xb5 "
                            "\\ufffd \\ufffd\\ufffd\"}"));
    ASSERT_TRUE(strstr(got, "\"args\":{\"k\\\"\":\"v\\u001f\"}"));
    /* nothing below 0x20 and no byte 0xff left raw */
    for (const char *p = got; *p; p++)
        ASSERT_TRUE((unsigned char)*p >= 0x20 || *p == '\n');
    ASSERT_TRUE(!strchr(got, '\xff'));
    T_FREE(free, got);
    T_FREE(sim_free, s);
    T_FREE(test_fclose, f);
}

TEST(disabled_trace_writes_nothing)
{
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    ASSERT_TRUE(sim_tracer(s) == NULL);
    char err[64] = "";
    ASSERT_EQ(sim_trace_close(s, err, sizeof err), 0);
    ASSERT_STREQ(err, "");
    ASSERT_EQ(sim_run(s, SIM_FOREVER), SIM_DONE);
    T_FREE(sim_free, s);
}

TEST(path_open_close_and_free)
{
    char *path = T_OWN(test_tmpfile("kbsim_test_trace", NULL), test_remove_file);
    ASSERT_TRUE(path);
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    char err[256];
    ASSERT_EQ(sim_trace_open(s, path, err, sizeof err), 0);
    /* one trace per simulation */
    ASSERT_EQ(sim_trace_open(s, path, err, sizeof err), SIM_EINVAL);
    ASSERT_TRUE(strstr(err, "already has a trace"));
    int k = sim_trace_track(sim_tracer(s), "system", "x");
    sim_trace_span(sim_tracer(s), k, "c", "n", 0, 1, NULL, 0);
    T_FREE(sim_free, s); /* closes the trace left open */
    char *got = T_OWN(slurp_path(path), free);
    ASSERT_TRUE(got);
    ASSERT_TRUE(strncmp(got, "{\"traceEvents\":[\n", 17) == 0);
    size_t n = strlen(got);
    ASSERT_STREQ(got + n - 27, "\n],\"displayTimeUnit\":\"ns\"}\n");
    T_FREE(free, got);
    T_FREE(test_remove_file, path);

    s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    ASSERT_EQ(sim_trace_open(s, "/nonexistent-dir/t.json", err, sizeof err),
              SIM_EINVAL);
    ASSERT_STREQ(err, "cannot open trace '/nonexistent-dir/t.json': "
                      "No such file or directory");
    ASSERT_TRUE(sim_tracer(s) == NULL);
    T_FREE(sim_free, s);
}

/* More than the buffer holds: written in pieces, same bytes as expected. */
TEST(large_trace_through_the_buffer)
{
    /* the stream first: the harness frees newest first, and sim_free
     * writes the end of a trace left open */
    FILE *f = T_OWN(tmpfile(), test_fclose);
    ASSERT_TRUE(f);
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    ASSERT_EQ(sim_trace_open_file(s, f, "big", NULL, 0), 0);
    struct sim_trace *t = sim_tracer(s);
    int k = sim_trace_track(t, "system", "link");
    char name[300];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    for (int i = 0; i < 2000; i++)
        sim_trace_span(t, k, "link", name, (sim_time)i * 10, (sim_time)i * 10 + 5,
                       NULL, 0);
    ASSERT_EQ(sim_trace_close(s, NULL, 0), 0);
    char *got = T_OWN(test_slurp(f), free);
    ASSERT_TRUE(got);
    size_t ev = strlen(",\n{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":0.000000,"
                       "\"dur\":0.000005,\"cat\":\"link\",\"name\":\"\"}") +
                strlen(name);
    size_t head = strstr(got, "{\"ph\":\"X\"") - got;
    ASSERT_U64_EQ(strlen(got), head + 2000 * ev - 2 + 27);
    ASSERT_TRUE(strstr(got, "\"ts\":0.019990,\"dur\":0.000005"));
    T_FREE(free, got);
    T_FREE(sim_free, s);
    T_FREE(test_fclose, f);
}

/* A write that fails is reported by close, naming the file. */
TEST(write_error_reported)
{
    FILE *f = T_OWN(fopen("/dev/full", "w"), test_fclose);
    if (!f)
        return; /* no /dev/full here */
    struct sim *s = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(s);
    ASSERT_EQ(sim_trace_open_file(s, f, "/dev/full", NULL, 0), 0);
    char err[256];
    ASSERT_EQ(sim_trace_close(s, err, sizeof err), SIM_EINVAL);
    ASSERT_STREQ(err, "cannot write trace '/dev/full': No space left on device");
    T_FREE(sim_free, s);
    T_FREE(test_fclose, f);
}

/* sim_trace_move: the file goes on in the second simulation, on the same
 * tracks; the first has no trace any more (freeing it writes nothing). */
TEST(trace_moves_to_another_sim)
{
    FILE *f = T_OWN(tmpfile(), test_fclose);
    ASSERT_TRUE(f);
    struct sim *a = T_OWN(sim_new(NULL), sim_free);
    struct sim *b = T_OWN(sim_new(NULL), sim_free);
    ASSERT_TRUE(a && b);
    ASSERT_EQ(sim_trace_move(a, b), SIM_EINVAL); /* a has no trace */
    char err[256];
    ASSERT_EQ(sim_trace_open_file(a, f, "moved", err, sizeof err), 0);
    struct sim_trace *t = sim_tracer(a);
    int pe = sim_trace_track_path(t, "sip0.cube0.pe0");
    ASSERT_EQ(pe, 0);
    sim_trace_span(t, pe, "kernel", "before", 0, 1, NULL, 0);
    ASSERT_EQ(sim_trace_move(a, b), 0);
    ASSERT_TRUE(sim_tracer(a) == NULL && sim_tracer(b) == t);
    ASSERT_EQ(sim_trace_move(b, b), SIM_EINVAL); /* b has one */
    ASSERT_EQ(sim_trace_close(a, err, sizeof err), 0); /* nothing to close */
    T_FREE(sim_free, a);
    ASSERT_EQ(sim_trace_track_path(sim_tracer(b), "sip0.cube0.pe0"), pe);
    sim_trace_span(t, pe, "kernel", "after", 2, 3, NULL, 0);
    ASSERT_EQ(sim_trace_close(b, err, sizeof err), 0);
    ASSERT_EQ(sim_trace_move(b, b), SIM_EINVAL); /* closed */
    char *got = T_OWN(test_slurp(f), free);
    ASSERT_TRUE(got);
    ASSERT_CONTAINS(got, "\"name\":\"before\"},\n{\"ph\":\"X\",\"pid\":1,\"tid\":1,"
                         "\"ts\":0.000002,\"dur\":0.000001,\"cat\":\"kernel\",\"name\":\"after\"}\n"
                         "],\"displayTimeUnit\":\"ns\"}\n");
    /* one footer, one set of names */
    ASSERT_TRUE(strstr(strstr(got, "displayTimeUnit") + 1, "displayTimeUnit") == NULL);
    ASSERT_TRUE(strstr(strstr(got, "thread_name") + 1, "thread_name") == NULL);
    T_FREE(free, got);
    T_FREE(sim_free, b);
    T_FREE(test_fclose, f);
}

TEST_MAIN(tiny_trace_exact_json, paused_trace_drops_records, escaping, disabled_trace_writes_nothing,
          path_open_close_and_free, large_trace_through_the_buffer,
          write_error_reported, trace_moves_to_another_sim)
