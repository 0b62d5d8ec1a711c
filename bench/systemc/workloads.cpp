// workloads.cpp — peer-benchmark workloads W1–W4 (bench/WORKLOADS.md) on SystemC 2.3.4
//
//   kbsim-bench-systemc timed|pingpong|ring|method P K
//
// Prints the same one line as kbsim-bench with peer=systemc and applies the
// same self-checks. Modules are elaborated and their coroutines created
// (initialize(true)) before the clock starts.
#include <systemc>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace sc_core;

namespace {

uint64_t g_events;
uint64_t g_K;
uint64_t g_P;
int64_t g_final_token = -1;
uint64_t g_bad_values;

struct TimedProc : sc_module {
    SC_HAS_PROCESS(TimedProc);
    explicit TimedProc(sc_module_name n) : sc_module(n) { SC_THREAD(run); }
    void run()
    {
        for (uint64_t k = 0; k < g_K; k++) {
            wait(sc_time(10, SC_NS));
            g_events++;
        }
    }
};

struct PingA : sc_module {
    sc_fifo<int> *a2b = nullptr, *b2a = nullptr;
    SC_HAS_PROCESS(PingA);
    explicit PingA(sc_module_name n) : sc_module(n) { SC_THREAD(run); }
    void run()
    {
        for (int k = 0; k < (int)g_K; k++) {
            a2b->write(k);
            int v = b2a->read();
            g_events++;
            if (v != k)
                g_bad_values++;
        }
    }
};

struct PongB : sc_module {
    sc_fifo<int> *a2b = nullptr, *b2a = nullptr;
    SC_HAS_PROCESS(PongB);
    explicit PongB(sc_module_name n) : sc_module(n) { SC_THREAD(run); }
    void run()
    {
        for (uint64_t k = 0; k < g_K; k++) {
            int v = a2b->read();
            g_events++;
            b2a->write(v);
        }
    }
};

struct RingNode : sc_module {
    sc_fifo<int> *in = nullptr, *out = nullptr;
    uint64_t index = 0;
    SC_HAS_PROCESS(RingNode);
    explicit RingNode(sc_module_name n) : sc_module(n) { SC_THREAD(run); }
    void run()
    {
        uint64_t laps = g_K / g_P;
        int tok = 0;
        for (uint64_t r = 0; r < laps; r++) {
            if (!(index == 0 && r == 0))
                tok = in->read();
            wait(sc_time(1, SC_NS));
            g_events++;
            out->write(tok + 1);
        }
        if (index == 0)
            g_final_token = in->read();
    }
};

uint64_t lcg_draw(uint64_t &x)
{
    x = x * 6364136223846793005u + 1442695040888963407u;
    return 1 + (x >> 33) % 1000;
}

struct MethodProc : sc_module {
    uint64_t x = 0, fired = 0;
    bool started = false;
    SC_HAS_PROCESS(MethodProc);
    explicit MethodProc(sc_module_name n) : sc_module(n) { SC_METHOD(run); }
    void run()
    {
        if (started) {
            g_events++;
            if (++fired == g_K)
                return;
        }
        started = true;
        next_trigger(sc_time((double)lcg_draw(x), SC_NS));
    }
};

uint64_t w4_expected_end(uint64_t P, uint64_t K)
{
    uint64_t end = 0;
    for (uint64_t i = 0; i < P; i++) {
        uint64_t x = i, sum = 0;
        for (uint64_t k = 0; k < K; k++)
            sum += lcg_draw(x);
        if (sum > end)
            end = sum;
    }
    return end;
}

int usage()
{
    std::fprintf(stderr, "usage: kbsim-bench-systemc timed|pingpong|ring|method P K\n");
    return 2;
}

bool parse_u64(const char *s, uint64_t &out)
{
    char *end;
    if (!s || !*s || *s == '-')
        return false;
    out = std::strtoull(s, &end, 10);
    return *end == 0;
}

std::string name_of(const char *prefix, uint64_t i)
{
    return std::string(prefix) + std::to_string(i);
}

} // namespace

int sc_main(int argc, char **argv)
{
    if (argc != 4 || !parse_u64(argv[2], g_P) || !parse_u64(argv[3], g_K) || g_P == 0)
        return usage();
    const std::string w = argv[1];
    // sc_start's default time resolution is 1 ps, like kbsim; keep it.
    sc_report_handler::set_actions(SC_INFO, SC_DO_NOTHING);

    // Modules and fifos are never deleted: SystemC does not support
    // deleting them after elaboration, and the process exits right after.
    std::vector<sc_fifo<int> *> fifos;
    uint64_t exp_end = 0, exp_events = g_P * g_K;

    if (w == "timed") {
        for (uint64_t i = 0; i < g_P; i++)
            new TimedProc(name_of("t", i).c_str());
        exp_end = 10 * g_K;
    } else if (w == "pingpong") {
        if (g_P % 2) {
            std::fprintf(stderr, "pingpong: P must be even, got %" PRIu64 "\n", g_P);
            return 2;
        }
        for (uint64_t i = 0; i < g_P / 2; i++) {
            auto *a2b = new sc_fifo<int>(name_of("a2b", i).c_str(), 1);
            auto *b2a = new sc_fifo<int>(name_of("b2a", i).c_str(), 1);
            auto *a = new PingA(name_of("A", i).c_str());
            auto *b = new PongB(name_of("B", i).c_str());
            a->a2b = b->a2b = a2b;
            a->b2a = b->b2a = b2a;
        }
    } else if (w == "ring") {
        if (g_K % g_P) {
            std::fprintf(stderr, "ring: K must be a multiple of P, got K=%" PRIu64 " P=%" PRIu64 "\n",
                         g_K, g_P);
            return 2;
        }
        for (uint64_t i = 0; i < g_P; i++)
            fifos.emplace_back(new sc_fifo<int>(name_of("f", i).c_str(), 1));
        for (uint64_t i = 0; i < g_P; i++) {
            auto *n = new RingNode(name_of("n", i).c_str());
            n->index = i;
            n->in = fifos[i];
            n->out = fifos[(i + 1) % g_P];
        }
        exp_end = g_K;
        exp_events = g_K;
    } else if (w == "method") {
        for (uint64_t i = 0; i < g_P; i++) {
            auto *m = new MethodProc(name_of("m", i).c_str());
            m->x = i;
        }
        exp_end = w4_expected_end(g_P, g_K);
    } else {
        return usage();
    }

    // Elaborate and create the coroutines without running any process.
    sc_get_curr_simcontext()->initialize(true);

    auto t0 = std::chrono::steady_clock::now();
    sc_start();
    auto t1 = std::chrono::steady_clock::now();
    double wall = std::chrono::duration<double>(t1 - t0).count();

    uint64_t end_ns = (uint64_t)(sc_time_stamp().value() / 1000);
    std::printf("workload=%s peer=systemc P=%" PRIu64 " K=%" PRIu64 " events=%" PRIu64
                " sim_end_ns=%" PRIu64 " wall_s=%.6f rate=%.0f\n",
                w.c_str(), g_P, g_K, g_events, end_ns, wall,
                wall > 0 ? (double)g_events / wall : 0.0);
    std::fflush(stdout);

    int bad = 0;
    if (g_events != exp_events) {
        std::fprintf(stderr, "%s: events %" PRIu64 ", expected %" PRIu64 "\n", w.c_str(),
                     g_events, exp_events);
        bad = 1;
    }
    if (end_ns != exp_end) {
        std::fprintf(stderr, "%s: sim_end_ns %" PRIu64 ", expected %" PRIu64 "\n", w.c_str(),
                     end_ns, exp_end);
        bad = 1;
    }
    if (w == "ring" && g_final_token != (int64_t)g_K) {
        std::fprintf(stderr, "ring: final token %" PRId64 ", expected %" PRIu64 "\n",
                     g_final_token, g_K);
        bad = 1;
    }
    if (g_bad_values) {
        std::fprintf(stderr, "pingpong: %" PRIu64 " reads returned a wrong value\n", g_bad_values);
        bad = 1;
    }
    return bad;
}
