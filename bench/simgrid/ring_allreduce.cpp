// ring_allreduce.cpp — the pure α-β ring all-reduce in SimGrid (S4U), the
// peer of bench/lua/abring.lua (bench/scale.sh prints both side by side)
//
//   kbsim-bench-simgrid N [CHUNK_BYTES [ALPHA_NS [BW_GBPS]]]   (defaults 128, 100, 128)
//
// N hosts p0..p<N-1>, each with a one-way link p<i> -> p<i+1> of ALPHA_NS
// and BW_GBPS (a full zone holding only those N routes), the CM02 network
// model without cross-traffic (a message of b bytes on an idle link takes
// latency + b / bandwidth), hosts of 1e12 flop/s. Each rank runs the
// reduce-scatter / all-gather ring of ring_rs_ag_allreduce: 2(N-1) steps,
// each receiving CHUNK_BYTES from the west neighbour while sending as many
// east, the first N-1 followed by an add of 1 flop (1 ps, as kbsim's add
// at its fastest clock). The end time is checked against
//
//   T = 2 (N-1) (alpha + c / bw) + (N-1) t_add
//
// to the picosecond; a mismatch prints MISMATCH and exits 1.
#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace sg4 = simgrid::s4u;

namespace {

constexpr double host_flops = 1e12; // 1 flop = 1 ps, the add of a step

struct ring {
    int n = 8;
    double chunk = 128, alpha_ns = 100, bw_gbps = 128;
    std::vector<sg4::Mailbox *> boxes; // rank r receives on boxes[r]
};

ring g;

void rank_main(int r)
{
    sg4::Mailbox *in = g.boxes[r];
    sg4::Mailbox *out = g.boxes[(r + 1) % g.n];
    static int payload; // what travels is the simulated size, not this
    for (int s = 0; s < 2 * (g.n - 1); s++) {
        int *got = nullptr;
        sg4::CommPtr rx = in->get_async<int>(&got);
        sg4::CommPtr tx = out->put_async(&payload, static_cast<uint64_t>(g.chunk));
        rx->wait();
        tx->wait();
        if (s < g.n - 1) // reduce-scatter: add the received chunk
            sg4::this_actor::execute(1.0);
    }
}

bool parse(const char *s, double min, double *out)
{
    char *end = nullptr;
    double v = std::strtod(s, &end);
    if (end == s || *end || !(v >= min) || std::isinf(v))
        return false;
    *out = v;
    return true;
}

} // namespace

int main(int argc, char **argv)
{
    sg4::Engine e(&argc, argv); // takes the --cfg= and --log= options out of argv
    double n = 0;
    if (argc < 2 || argc > 5 || !parse(argv[1], 2, &n) || n != std::floor(n) || n > 1e6 ||
        (argc > 2 && !parse(argv[2], 1, &g.chunk)) ||
        (argc > 3 && !parse(argv[3], 0, &g.alpha_ns)) ||
        (argc > 4 && !parse(argv[4], 1e-3, &g.bw_gbps))) {
        std::fprintf(stderr, "usage: %s N [CHUNK_BYTES [ALPHA_NS [BW_GBPS]]]\n"
                             "  N >= 2 hosts in a one-way ring; defaults 128 B, 100 ns, 128 GB/s\n",
                     argv[0]);
        return 2;
    }
    g.n = static_cast<int>(n);

    // Pure α-β: CM02 with latency and bandwidth factors of 1 and no
    // weight on the latency (set, not assumed), no reverse traffic charged
    // on the links, times resolved far below the 1 ps add.
    xbt_log_control_set("xbt_cfg.thres:warning");
    sg4::Engine::set_config("network/model:CM02");
    sg4::Engine::set_config("network/latency-factor", 1.0);
    sg4::Engine::set_config("network/bandwidth-factor", 1.0);
    sg4::Engine::set_config("network/weight-S", 0.0);
    sg4::Engine::set_config("network/crosstraffic", false);
    sg4::Engine::set_config("surf/precision", 1e-15);

    sg4::NetZone *zone = sg4::create_full_zone("ring");
    std::vector<sg4::Host *> hosts;
    for (int i = 0; i < g.n; i++)
        hosts.push_back(zone->create_host("p" + std::to_string(i), host_flops));
    for (int i = 0; i < g.n; i++) {
        sg4::Link *l = zone->create_link("l" + std::to_string(i), g.bw_gbps * 1e9)
                           ->set_latency(g.alpha_ns * 1e-9)
                           ->seal();
        zone->add_route(hosts[i]->get_netpoint(), hosts[(i + 1) % g.n]->get_netpoint(), nullptr,
                        nullptr, {sg4::LinkInRoute(l)}, false);
    }
    zone->seal();

    for (int i = 0; i < g.n; i++)
        g.boxes.push_back(sg4::Mailbox::by_name("p" + std::to_string(i)));
    for (int i = 0; i < g.n; i++)
        sg4::Actor::create("rank" + std::to_string(i), hosts[i], rank_main, i);
    e.run();

    // the closed form in ps, each term rounded to the ps as kbsim rounds it
    double t = sg4::Engine::get_clock();
    long long alpha_ps = std::llround(g.alpha_ns * 1000);
    long long ser_ps = std::llround(g.chunk * 1000 / g.bw_gbps);
    long long want_ps = 2LL * (g.n - 1) * (alpha_ps + ser_ps) + (g.n - 1);
    long long got_ps = std::llround(t * 1e12);
    bool ok = got_ps == want_ps;
    std::printf("simgrid n=%d bytes=%.0f sim_ns=%.3f closed_ns=%.3f %s\n", g.n, g.n * g.chunk,
                t * 1e9, want_ps / 1000.0, ok ? "exact" : "MISMATCH");
    return ok ? 0 : 1;
}
