/* test_topology_schema.c — topology.yaml and ccl.yaml: the defaults, user
 * files over them, --set, and every kind of bad input with its exact
 * "file:line:col: problem" message */
#include "ccl_schema.h"
/* reading the defaults makes hundreds of allocations from a few call
 * sites: under --failalloc, every site's first, the first 60 and 50
 * spread over the rest fail in turn (the ASan run stays short) */
#define TEST_FAILALLOC_ALL 60
#include "test.h"
#include "topology_schema.h"

#define TOPO_DEFAULTS KBSIM_SOURCE_DIR "/configs/topology.yaml"
#define CCL_DEFAULTS KBSIM_SOURCE_DIR "/configs/ccl.yaml"

static struct kb_config_errors errs;

/* Load the default topology with an optional user text and --set list;
 * returns the load's result, the errors are in `errs`. */
static int load(struct kb_topology_cfg *cfg, const char *user, const char *const *sets,
                size_t n_sets)
{
    kb_config_errors_release(&errs);
    struct kb_config_src src = {
        .defaults_path = TOPO_DEFAULTS,
        .user_name = "user.yaml",
        .user_text = user,
        .sets = sets,
        .n_sets = n_sets,
    };
    return kb_topo_cfg_load(cfg, &src, &errs);
}

static const char *all_errors(void)
{
    static char buf[8192];
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; i < errs.n; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? "\n" : "",
                                errs.msgs[i]);
    return buf;
}

TEST(defaults_load)
{
    struct kb_topology_cfg cfg;
    ASSERT_EQ(load(&cfg, NULL, NULL, 0), 0);
    ASSERT_STREQ(all_errors(), "");
    ASSERT_EQ(cfg.sips.count, 2);
    ASSERT_EQ(cfg.sips.topology, KB_TOPO_RING_1D);
    ASSERT_EQ(cfg.sips.w, 2);
    ASSERT_EQ(cfg.sips.h, 1);
    ASSERT_EQ(cfg.cubes_per_sip, 16);
    ASSERT_EQ(cfg.pes_per_cube, 8);
    ASSERT_EQ(cfg.n_pes, 256);
    ASSERT_NEAR(cfg.cube.noc.bandwidth_gbps, 256, 0);
    ASSERT_NEAR(cfg.cube.noc.ns_per_mm, 0.1, 1e-12);
    ASSERT_U64_EQ(cfg.cube.sram.capacity, 32u << 20);
    ASSERT_U64_EQ(cfg.pe.tcm.capacity, 16u << 20);
    ASSERT_NEAR(cfg.pe.tcm.bandwidth_gbps, 512, 0);
    ASSERT_EQ(cfg.pe.hbm.pseudo_channels, 8);
    ASSERT_EQ(cfg.pe.hbm.burst_bytes, 256);
    ASSERT_U64_EQ(cfg.pe.hbm.capacity, 2ull << 30);
    ASSERT_NEAR(cfg.pe.hbm.setup_ns, 6, 0);
    ASSERT_EQ(cfg.pe.gemm.tile.n, 64);
    ASSERT_EQ(cfg.pe.cpu.dispatch_cycles, 4);
    ASSERT_EQ(cfg.ucie.connections, 4);
    ASSERT_NEAR(cfg.ucie.gbps_per_connection, 128, 0);
    ASSERT_NEAR(cfg.ucie.port_overhead_ns, 8, 0);
    ASSERT_EQ(cfg.flit_bytes, 256);
    ASSERT_NEAR(cfg.clock_ghz, 1.0, 0);
    ASSERT_EQ(cfg.ipcq.n_slots, 4);
    ASSERT_U64_EQ(cfg.ipcq.slot_size, 4096);
    ASSERT_EQ(cfg.ipcq.buffer_kind, KB_TOPO_BUF_TCM);
    ASSERT_EQ(cfg.ipcq.backpressure, KB_TOPO_BP_SLEEP);
    ASSERT_EQ(cfg.ipcq.credit_bytes, 16);
}

TEST(user_file_overrides_one_key)
{
    struct kb_topology_cfg cfg;
    ASSERT_EQ(load(&cfg, "cube:\n  noc:\n    bandwidth_gbps: 512\n", NULL, 0), 0);
    ASSERT_NEAR(cfg.cube.noc.bandwidth_gbps, 512, 0);
    ASSERT_NEAR(cfg.cube.noc.ns_per_mm, 0.1, 1e-12); /* its siblings stay */
    ASSERT_EQ(cfg.n_pes, 256);
}

TEST(user_file_on_disk)
{
    char *path = T_OWN(test_tmpfile("kbsim_test_topo",
                                    "sips:\n  count: 6\n  topology: torus_2d\n  w: 2\n  h: 3\n"),
                       test_remove_file);
    ASSERT_TRUE(path);
    kb_config_errors_release(&errs);
    struct kb_config_src src = {.defaults_path = TOPO_DEFAULTS, .user_path = path};
    struct kb_topology_cfg cfg;
    ASSERT_EQ(kb_topo_cfg_load(&cfg, &src, &errs), 0);
    T_FREE(test_remove_file, path);
    ASSERT_EQ(cfg.sips.w, 2);
    ASSERT_EQ(cfg.sips.h, 3);
    ASSERT_EQ(cfg.n_pes, 6 * 16 * 8);
}

TEST(unknown_key_with_suggestion)
{
    struct kb_topology_cfg cfg;
    ASSERT_EQ(load(&cfg, "cube:\n  noc:\n    bandwith: 10\n  sram: {capacty: 1MiB}\n", NULL, 0),
              -1);
    ASSERT_STREQ(all_errors(),
                 "user.yaml:3:5: unknown key 'bandwith' (did you mean 'bandwidth_gbps'?)\n"
                 "user.yaml:4:10: unknown key 'capacty' (did you mean 'capacity'?)");
}

TEST(unknown_key_without_suggestion)
{
    struct kb_topology_cfg cfg;
    ASSERT_EQ(load(&cfg, "sips:\n  zzzzzz: 1\n", NULL, 0), -1);
    ASSERT_STREQ(all_errors(),
                 "user.yaml:2:3: unknown key 'zzzzzz' (known: count, topology, w, h)");
}

TEST(wrong_types)
{
    struct kb_topology_cfg cfg;
    ASSERT_EQ(load(&cfg,
                   "cube:\n  noc:\n    bandwidth_gbps: fast\n"
                   "sips: 3\n"
                   "ipcq:\n  n_slots: 4.5\n  slot_size: 4KB\n",
                   NULL, 0),
              -1);
    ASSERT_STREQ(all_errors(),
                 "user.yaml:4:7: expected a mapping for 'sips', got '3'\n"
                 "user.yaml:3:21: expected a number for 'bandwidth_gbps', got 'fast'\n"
                 "user.yaml:6:12: expected an integer for 'n_slots', got '4.5'\n"
                 "user.yaml:7:14: expected a byte size for 'slot_size', got '4KB' "
                 "(decimal units are ambiguous: use KiB, MiB, GiB or TiB)");
}

TEST(zero_and_negative_bandwidth)
{
    struct kb_topology_cfg cfg;
    ASSERT_EQ(load(&cfg,
                   "cube:\n  noc:\n    bandwidth_gbps: 0\n  sram:\n    bandwidth_gbps: -5\n"
                   "ucie: {gbps_per_connection: 0.0}\n",
                   NULL, 0),
              -1);
    ASSERT_STREQ(all_errors(),
                 "user.yaml:3:21: expected a value >= 0.001 and <= 1000000 for 'bandwidth_gbps', got 0\n"
                 "user.yaml:5:21: expected a value >= 0.001 and <= 1000000 for 'bandwidth_gbps', got -5\n"
                 "user.yaml:6:29: expected a value >= 0.001 and <= 1000000 for 'gbps_per_connection', got 0.0");
}

TEST(ranges_and_powers_of_two)
{
    struct kb_topology_cfg cfg;
    ASSERT_EQ(load(&cfg,
                   "cube: {corners: 5}\npe:\n  hbm: {pseudo_channels: 6}\n"
                   "sips: {count: 0}\n",
                   NULL, 0),
              -1);
    ASSERT_STREQ(all_errors(),
                 "user.yaml:4:15: expected a value >= 1 and <= 4096 for 'count', got 0\n"
                 "user.yaml:1:17: expected a value >= 1 and <= 4 for 'corners', got 5\n"
                 "user.yaml:3:26: expected a power of two for 'pseudo_channels', got 6");
}

TEST(bad_enum_value)
{
    struct kb_topology_cfg cfg;
    ASSERT_EQ(load(&cfg, "sips:\n  topology: tours_2d\nipcq: {buffer_kind: dram}\n", NULL, 0), -1);
    ASSERT_STREQ(all_errors(),
                 "user.yaml:2:13: expected one of ring_1d, torus_2d, mesh_2d, mesh_2d_no_wrap "
                 "for 'topology', got 'tours_2d' (did you mean 'torus_2d'?)\n"
                 "user.yaml:3:21: expected one of tcm, sram, hbm for 'buffer_kind', got 'dram' "
                 "(did you mean 'sram'?)");
}

TEST(torus_of_six_needs_w_and_h)
{
    struct kb_topology_cfg cfg;
    ASSERT_EQ(load(&cfg, "sips:\n  count: 6\n  topology: torus_2d\n", NULL, 0), -1);
    ASSERT_STREQ(all_errors(), "user.yaml:2:10: 6 SIPs on torus_2d need explicit w and h "
                               "(3x2 or 2x3)");
    ASSERT_EQ(load(&cfg, "sips: {count: 12, topology: mesh_2d}\n", NULL, 0), -1);
    ASSERT_STREQ(all_errors(), "user.yaml:1:15: 12 SIPs on mesh_2d need explicit w and h "
                               "(4x3, 3x4, 6x2 or 2x6)");
    ASSERT_EQ(load(&cfg, "sips: {count: 7, topology: mesh_2d_no_wrap}\n", NULL, 0), -1);
    ASSERT_STREQ(all_errors(), "user.yaml:1:15: 7 SIPs on mesh_2d_no_wrap need explicit w and h "
                               "(7x1 or 1x7)");
}

TEST(sip_grid_resolution)
{
    struct kb_topology_cfg cfg;
    ASSERT_EQ(load(&cfg, "sips: {count: 4, topology: torus_2d}\n", NULL, 0), 0);
    ASSERT_EQ(cfg.sips.w, 2);
    ASSERT_EQ(cfg.sips.h, 2);
    ASSERT_EQ(load(&cfg, "sips: {count: 6, topology: mesh_2d_no_wrap, w: 3, h: 2}\n", NULL, 0),
              0);
    ASSERT_EQ(cfg.sips.w, 3);
    ASSERT_EQ(cfg.sips.h, 2);
    ASSERT_EQ(load(&cfg, "sips: {count: 6, topology: torus_2d, w: 2, h: 2}\n", NULL, 0), -1);
    ASSERT_STREQ(all_errors(), "user.yaml:1:15: sips.count is 6 but w x h is 2x2 = 4");
    ASSERT_EQ(load(&cfg, "sips: {count: 6, topology: torus_2d, w: 3}\n", NULL, 0), -1);
    ASSERT_STREQ(all_errors(), "user.yaml:1:41: 'w' given without 'h'");
    ASSERT_EQ(load(&cfg, "sips: {count: 6, h: 3}\n", NULL, 0), -1);
    ASSERT_STREQ(all_errors(), "user.yaml:1:21: 'h' applies to 2-d topologies, not ring_1d");
}

TEST(gemm_tile_multiple_of_mac)
{
    struct kb_topology_cfg cfg;
    ASSERT_EQ(load(&cfg, "pe:\n  gemm:\n    tile: {m: 24, n: 64, k: 32}\n", NULL, 0), -1);
    ASSERT_STREQ(all_errors(),
                 "user.yaml:3:15: gemm tile m 24 is not a multiple of the mac array's 16");
}

TEST(every_error_collected)
{
    struct kb_topology_cfg cfg;
    ASSERT_EQ(load(&cfg,
                   "sips:\n  count: 6\n  topology: torus_2d\n  cuont: 2\n"
                   "cube:\n  noc:\n    bandwidth_gbps: 0\n    bandwidth_gbps: 1\n"
                   "clock_ghz: fast\n",
                   NULL, 0),
              -1);
    ASSERT_STREQ(all_errors(),
                 "user.yaml:8:5: duplicate key 'bandwidth_gbps' (first at 7:5)\n"
                 "user.yaml:4:3: unknown key 'cuont' (did you mean 'count'?)\n"
                 "user.yaml:7:21: expected a value >= 0.001 and <= 1000000 for 'bandwidth_gbps', got 0\n"
                 "user.yaml:9:12: expected a number for 'clock_ghz', got 'fast'\n"
                 "user.yaml:2:10: 6 SIPs on torus_2d need explicit w and h (3x2 or 2x3)");
}

TEST(syntax_error_in_user_file)
{
    struct kb_topology_cfg cfg;
    ASSERT_EQ(load(&cfg, "sips:\n  count: [2\n", NULL, 0), -1);
    ASSERT_STREQ(all_errors(), "user.yaml:3:1: did not find expected ',' or ']' "
                               "(while parsing a flow sequence at 2:10)");
    ASSERT_EQ(load(&cfg, "- 1\n- 2\n", NULL, 0), -1);
    ASSERT_STREQ(all_errors(), "user.yaml:1:1: expected a mapping for 'the top level', "
                               "got a sequence");
}

TEST(set_overrides)
{
    struct kb_topology_cfg cfg;
    const char *sets[] = {"sips.count=8", "cube.noc.bandwidth_gbps=64", "pe.hbm.capacity=4GiB",
                          "ipcq.buffer_kind=sram"};
    ASSERT_EQ(load(&cfg, "sips: {count: 3}\n", sets, 4), 0);
    ASSERT_STREQ(all_errors(), "");
    ASSERT_EQ(cfg.sips.count, 8); /* --set wins over the user file */
    ASSERT_EQ(cfg.n_pes, 8 * 16 * 8);
    ASSERT_NEAR(cfg.cube.noc.bandwidth_gbps, 64, 0);
    ASSERT_U64_EQ(cfg.pe.hbm.capacity, 4ull << 30);
    ASSERT_EQ(cfg.ipcq.buffer_kind, KB_TOPO_BUF_SRAM);
    /* --set can complete what a user file left ambiguous */
    const char *wh[] = {"sips.w=3", "sips.h=2"};
    ASSERT_EQ(load(&cfg, "sips: {count: 6, topology: torus_2d}\n", wh, 2), 0);
    ASSERT_EQ(cfg.sips.w, 3);
}

TEST(set_errors)
{
    struct kb_topology_cfg cfg;
    const char *sets[] = {"sips.cuont=8", "sips.count=fast", "cube.noc=1", "nonsense",
                          "cube.noc.bandwidth_gbps=-1", "bandwith=3"};
    ASSERT_EQ(load(&cfg, NULL, sets, 6), -1);
    ASSERT_STREQ(all_errors(),
                 "--set: unknown key 'sips.cuont' (nearest: sips.count)\n"
                 "--set: 'cube.noc' is a section, not a value; set one of its keys\n"
                 "--set: expected KEY=VALUE, got 'nonsense'\n"
                 "--set: unknown key 'bandwith' (nearest: cube.noc.bandwidth_gbps, "
                 "cube.sram.bandwidth_gbps, pe.tcm.bandwidth_gbps)\n"
                 "--set sips.count: expected an integer, got 'fast'\n"
                 "--set cube.noc.bandwidth_gbps: expected a value >= 0.001 and <= 1000000, "
                 "got -1");
}

TEST(ccl_defaults_and_overrides)
{
    kb_config_errors_release(&errs);
    struct kb_ccl_cfg ccl;
    const char *sets[] = {"ccl.n_elem=4096", "ccl.algorithms.tree_allreduce.world_size=7",
                          "sips.count=6"};
    struct kb_config_src src = {
        .defaults_path = CCL_DEFAULTS,
        .user_name = "my_ccl.yaml",
        .user_text = "ccl:\n  buffer_kind: hbm\n  algorithms:\n    ring_allreduce: "
                     "{world_size: 8}\n",
        .sets = sets,
        .n_sets = 3,
        .sets_foreign_ok = true,
    };
    ASSERT_EQ(kb_ccl_cfg_load(&ccl, &src, &errs), 0);
    ASSERT_STREQ(all_errors(), "");
    ASSERT_STREQ(ccl.algorithm.text, "lrab");
    ASSERT_CONTAINS(ccl.algorithm.where, "configs/ccl.yaml:4:14");
    ASSERT_EQ(ccl.n_elem, 4096);
    ASSERT_EQ(ccl.dtype, KB_CCL_F16);
    ASSERT_EQ(ccl.buffer_kind, KB_TOPO_BUF_HBM);
    ASSERT_EQ(ccl.backpressure, KB_TOPO_BP_SLEEP);
    ASSERT_EQ(ccl.n_algorithms, 2);
    ASSERT_STREQ(ccl.algorithms[0].name.text, "ring_allreduce");
    ASSERT_STREQ(ccl.algorithms[0].name.where, "my_ccl.yaml:4:5");
    ASSERT_EQ(kb_ccl_world_size(&ccl, "ring_allreduce", 256), 8);
    ASSERT_EQ(kb_ccl_world_size(&ccl, "tree_allreduce", 256), 7);
    ASSERT_EQ(kb_ccl_world_size(&ccl, "lrab", 256), 256);
}

TEST(ccl_errors)
{
    kb_config_errors_release(&errs);
    struct kb_ccl_cfg ccl;
    struct kb_config_src src = {
        .defaults_path = CCL_DEFAULTS,
        .user_name = "c.yaml",
        .user_text = "ccl:\n  algoritm: ring\n  n_elem: 0\n  algorithms:\n"
                     "    ring: {world_size: 0, extra: 1}\n    tree: 4\n",
    };
    ASSERT_EQ(kb_ccl_cfg_load(&ccl, &src, &errs), -1);
    ASSERT_STREQ(all_errors(),
                 "c.yaml:2:3: unknown key 'algoritm' (did you mean 'algorithm'?)\n"
                 "c.yaml:3:11: expected a value >= 1 and <= 1073741824 for 'n_elem', got 0\n"
                 "c.yaml:6:11: expected a mapping for 'tree', got '4'\n"
                 "c.yaml:5:27: unknown key 'extra' (known: world_size)\n"
                 "c.yaml:5:24: expected a value >= 1 and <= 16777216 for 'world_size', got 0");
}

TEST(set_list_shared_by_two_configs)
{
    kb_config_errors_release(&errs);
    const struct kb_config_key *schemas[] = {kb_topo_schema(), kb_ccl_schema()};
    const char *sets[] = {"sips.count=4", "ccl.n_elem=8", "sipz.count=4"};
    kb_config_check_sets(&errs, schemas, 2, sets, 3);
    ASSERT_STREQ(all_errors(), "--set: unknown key 'sipz.count' (nearest: sips.count)");
    ASSERT_TRUE(kb_config_schema_find(kb_topo_schema(), "cube.noc.cube_mm") != NULL);
    ASSERT_TRUE(kb_config_schema_find(kb_topo_schema(), "cube.noc.") == NULL);
    ASSERT_TRUE(kb_config_schema_find(kb_ccl_schema(), "ccl.algorithms.x.world_size") != NULL);
    ASSERT_TRUE(kb_config_schema_find(kb_ccl_schema(), "ccl.algorithms.x") == NULL);
    kb_config_errors_release(&errs);
}

/* Each key's own range; the limits shown as written (1GiB, 1000000) */
TEST(every_key_bounded)
{
    struct kb_topology_cfg cfg;
    ASSERT_EQ(load(&cfg,
                   "clock_ghz: 1e-300\n"
                   "cube: {noc: {bandwidth_gbps: 1e-300, router_overhead_ns: 2e9}}\n"
                   "pe: {hbm: {pseudo_channels: 1024, burst_bytes: 2097152},\n"
                   "     tcm: {capacity: 2TiB}, gemm: {tile: {m: 8192}}}\n"
                   "ipcq: {slot_size: 16777215TiB, credit_bytes: 2000000000}\n"
                   "flit_bytes: 3000000000\n",
                   NULL, 0),
              -1);
    ASSERT_STREQ(all_errors(),
                 "user.yaml:2:30: expected a value >= 0.001 and <= 1000000 for "
                 "'bandwidth_gbps', got 1e-300\n"
                 "user.yaml:2:58: expected a value >= 0 and <= 1000000000 for "
                 "'router_overhead_ns', got 2e9\n"
                 "user.yaml:4:22: expected a value >= 1 and <= 1TiB for 'capacity', got 2TiB\n"
                 "user.yaml:3:29: expected a value >= 1 and <= 64 for 'pseudo_channels', got 1024\n"
                 "user.yaml:3:48: expected a value >= 1 and <= 1048576 for 'burst_bytes', "
                 "got 2097152\n"
                 "user.yaml:4:46: expected a value >= 1 and <= 4096 for 'm', got 8192\n"
                 "user.yaml:6:13: expected a value >= 1 and <= 1048576 for 'flit_bytes', "
                 "got 3000000000\n"
                 "user.yaml:1:12: expected a value >= 0.001 and <= 1000 for 'clock_ghz', "
                 "got 1e-300\n"
                 "user.yaml:5:19: expected a value >= 1 and <= 1GiB for 'slot_size', "
                 "got 16777215TiB\n"
                 "user.yaml:5:46: expected a value >= 1 and <= 1048576 for 'credit_bytes', "
                 "got 2000000000");
    /* the limits themselves pass */
    ASSERT_EQ(load(&cfg,
                   "clock_ghz: 1000\ncube: {noc: {bandwidth_gbps: 0.001}}\n"
                   "pe: {tcm: {capacity: 1TiB}}\nipcq: {slot_size: 1GiB}\n",
                   NULL, 0),
              0);
    ASSERT_U64_EQ(cfg.pe.tcm.capacity, 1ull << 40);
}

/* A product out of range is reported at the factor nearer its maximum,
 * naming the other */
TEST(products_bounded)
{
    struct kb_topology_cfg cfg;
    ASSERT_EQ(load(&cfg, "cube: {noc: {ns_per_mm: 2e8}}\n", NULL, 0), -1);
    ASSERT_CONTAINS(all_errors(), "user.yaml:1:25: the NoC hop latency ns_per_mm x cube_mm / 2 "
                                  "= 1.7e+09 ns is above 1e+09 ns (cube.noc.cube_mm is 17 at ");
    ASSERT_CONTAINS(all_errors(), "configs/topology.yaml:");
    ASSERT_EQ(load(&cfg, "cube: {noc: {ns_per_mm: 2, cube_mm: 1000}}\n", NULL, 0), 0);
    const char *sets[] = {"cube.noc.cube_mm=1000", "cube.noc.ns_per_mm=1e7"};
    ASSERT_EQ(load(&cfg, NULL, sets, 2), -1);
    ASSERT_STREQ(all_errors(), "--set cube.noc.cube_mm: the NoC hop latency ns_per_mm x "
                               "cube_mm / 2 = 5e+09 ns is above 1e+09 ns (cube.noc.ns_per_mm "
                               "is 1e7 at --set cube.noc.ns_per_mm)");
    ASSERT_EQ(load(&cfg, "ucie: {connections: 64, gbps_per_connection: 20000}\n", NULL, 0), -1);
    ASSERT_CONTAINS(all_errors(), "user.yaml:1:21: the UCIe port bandwidth connections x "
                                  "gbps_per_connection = 1.28e+06 GB/s is above 1e+06 GB/s");
    ASSERT_EQ(load(&cfg, "sips: {count: 2048}\nsip: {cube_mesh: {w: 64, h: 64}}\n", NULL, 0),
              -1);
    ASSERT_STREQ(all_errors(), "user.yaml:1:15: 67108864 PEs (sips.count x cube_mesh w x h x "
                               "corners x pes_per_corner = 2048 x 64x64 x 4 x 2) is more than "
                               "16777216");
    /* a factor out of its own range has its message only */
    ASSERT_EQ(load(&cfg, "cube: {noc: {ns_per_mm: 1e300, cube_mm: 1e300}}\n", NULL, 0), -1);
    ASSERT_STREQ(all_errors(), "user.yaml:1:25: expected a value >= 0 and <= 1000000000 for "
                               "'ns_per_mm', got 1e300\n"
                               "user.yaml:1:41: expected a value >= 0.001 and <= 1000 for "
                               "'cube_mm', got 1e300");
}

TEST(missing_defaults_file)
{
    kb_config_errors_release(&errs);
    struct kb_config_src src = {.defaults_path = "/nonexistent/topology.yaml"};
    struct kb_topology_cfg cfg;
    ASSERT_EQ(kb_topo_cfg_load(&cfg, &src, &errs), -1);
    ASSERT_STREQ(all_errors(),
                 "/nonexistent/topology.yaml: cannot open: No such file or directory");
    kb_config_errors_release(&errs);
}

TEST_MAIN(defaults_load, every_key_bounded, products_bounded, user_file_overrides_one_key, user_file_on_disk,
          unknown_key_with_suggestion, unknown_key_without_suggestion, wrong_types,
          zero_and_negative_bandwidth, ranges_and_powers_of_two, bad_enum_value,
          torus_of_six_needs_w_and_h, sip_grid_resolution, gemm_tile_multiple_of_mac,
          every_error_collected, syntax_error_in_user_file, set_overrides, set_errors,
          ccl_defaults_and_overrides, ccl_errors, set_list_shared_by_two_configs,
          missing_defaults_file)
