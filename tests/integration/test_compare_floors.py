"""The floor arithmetic of bench/compare/run_compare.py: the prefill floor against each int8
ceiling, and the tables both floor accounts print. No server: these are the numbers a
comparison reports, checked against hand-computed ones."""
import os
import sys
import types

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "compare"))
import run_compare  # noqa: E402

ARGS = types.SimpleNamespace(prefill_len=511, decode_len=128)
FIG = {"matmul_flops_per_token": 200e6, "attention_flops_per_pair": 40_000}


def test_a_prompt_token_counts_attention_at_the_mean_causal_context():
    # 511 prompt tokens attend to 1..511 keys: a mean of 256.
    assert run_compare.prompt_flops_per_token(ARGS, FIG) == 200e6 + 40_000 * 256


def test_prefill_floors_against_each_ceiling_the_row_has():
    flops = 250e6
    row = {"dot_i8_vnni": 1500e9, "dot_i8_avx2": 400e9, "dot_i8_blocks_vnni": 800e9,
           "dot_i8_blocks_amx": 1400e9, "dot_i8_amx_k32": 5000e9}
    p = run_compare.prefill_floors(flops, row, {"tokamak": 3000.0, "llama.cpp": 500.0})
    assert p["gflop_per_token"] == 0.25
    assert list(p["ceilings"]) == ["int8 dot", "32-blocks scaled", "AMX 32 deep"]
    dot = p["ceilings"]["int8 dot"]
    assert dot["gops"] == 1500 and dot["floor_tok_s"] == 6000
    assert dot["tokamak_x"] == 2.0 and dot["llama.cpp_x"] == 12.0
    # The blocks' ceiling is the better of the two forms.
    assert p["ceilings"]["32-blocks scaled"]["floor_tok_s"] == 5600
    assert p["ceilings"]["AMX 32 deep"]["tokamak_x"] == 20000 / 3000


def test_the_by_unit_floor_takes_attention_at_the_fp32_fma_peak():
    # 200 MFLOP of matmuls at 1,000 GOPS (0.2 ms) + 50 MFLOP of attention at 250 GFLOP/s
    # (0.2 ms): 0.4 ms a token, 2,500 tok/s, an effective 625 GOPS.
    row = {"dot_i8_vnni": 1000e9, "fma_f32_avx2": 125e9, "fma_f32_avx512": 250e9}
    p = run_compare.prefill_floors(250e6, row, {"tokamak": 1250.0, "llama.cpp": 250.0}, 50e6)
    assert list(p["ceilings"]) == ["int8 dot", run_compare.BY_UNIT_CEILING]
    unit = p["ceilings"][run_compare.BY_UNIT_CEILING]
    assert abs(unit["floor_tok_s"] - 2500) < 1e-6 and abs(unit["gops"] - 625) < 1e-9
    assert abs(unit["tokamak_x"] - 2.0) < 1e-9 and abs(unit["llama.cpp_x"] - 10.0) < 1e-9
    # Without attention FLOPs, or without an FMA rate, there is no by-unit floor.
    assert list(run_compare.prefill_floors(250e6, row, {"tokamak": 1.0})["ceilings"]) == ["int8 dot"]
    assert list(run_compare.prefill_floors(250e6, {"dot_i8_vnni": 1000e9}, {"tokamak": 1.0},
                                           50e6)["ceilings"]) == ["int8 dot"]


def test_ceilings_a_machine_lacks_are_left_out():
    # An AVX2-only machine, or a ceilings file from before the block ceilings.
    p = run_compare.prefill_floors(1e9, {"dot_i8_avx2": 400e9, "dot_i8_vnni": 0.0},
                                   {"tokamak": 100.0, "llama.cpp": 50.0})
    assert list(p["ceilings"]) == ["int8 dot"]
    assert p["ceilings"]["int8 dot"]["floor_tok_s"] == 400


def test_tables_list_every_repeat_and_skip_repeats_without_a_prefill_account():
    decode = {"token_mb": 110.0, "read_bw_gb_s": 33.0, "read_bw_pass_gb_s": 30.0,
              "floor_ms": 3.3, "floor_pass_ms": 3.6, "tokamak_ms": 4.6, "llama.cpp_ms": 20.0}
    prefill = run_compare.prefill_floors(230e6, {"dot_i8_vnni": 1600e9},
                                         {"tokamak": 2000.0, "llama.cpp": 300.0})
    floors = [{"decode": decode, "prefill": prefill}, {"decode": decode}]
    decode_rows = run_compare.floor_table(floors).splitlines()[2:]
    assert len(decode_rows) == 2 and "**1.39**" in decode_rows[0]
    prefill_rows = run_compare.prefill_floor_table(floors).splitlines()[2:]
    assert len(prefill_rows) == 1
    assert "| 0 | 0.230 | int8 dot | 1600.0 | 6956.5 | **3.48** | **23.19** |" == prefill_rows[0]


def test_llamacpp_takes_its_best_build_per_metric():
    builds = {"llama.cpp-build-0.3.36": {"prefill_tok_s": 330.0, "decode_tok_s": 44.0},
              "llama.cpp-build-0.3.36-avx512": {"prefill_tok_s": 360.0, "decode_tok_s": 43.0}}
    fig = run_compare.best_of_builds(builds)
    assert fig["prefill_tok_s"] == 360.0 and fig["decode_tok_s"] == 44.0
    assert fig["best_build"] == {"prefill_tok_s": "llama.cpp-build-0.3.36-avx512",
                                 "decode_tok_s": "llama.cpp-build-0.3.36"}
    a = types.SimpleNamespace(
        llama_bench="/p/llama.cpp-build-0.3.36/bin/llama-bench",
        llama_server="/p/llama.cpp-build-0.3.36/bin/llama-server",
        llama_bench_also=["/p/llama.cpp-build-0.3.36-avx512/bin/llama-bench"])
    text = run_compare.peer_builds_text(a, [fig["best_build"], fig["best_build"]])
    assert "best of 2 builds" in text
    assert "decode_tok_s: llama.cpp-build-0.3.36 2" in text
    assert "prefill_tok_s: llama.cpp-build-0.3.36-avx512 2" in text
    assert "llama-server of llama.cpp-build-0.3.36 serves" in text


def test_the_build_whose_decode_won_most_serves(tmp_path):
    benches = []
    for name in ("llama.cpp-build-0.3.36", "llama.cpp-build-0.3.36-avx512"):
        bin_dir = tmp_path / name / "bin"
        bin_dir.mkdir(parents=True)
        for tool in ("llama-bench", "llama-server"):
            (bin_dir / tool).write_text("")
            (bin_dir / tool).chmod(0o755)
        benches.append(str(bin_dir / "llama-bench"))
    a = types.SimpleNamespace(llama_bench=benches[0], llama_bench_also=benches[1:],
                              llama_server=os.path.join(os.path.dirname(benches[0]), "llama-server"))
    native, avx512 = (os.path.basename(os.path.dirname(os.path.dirname(b))) for b in benches)
    won = lambda decode: {"prefill_tok_s": native, "decode_tok_s": decode}  # noqa: E731
    served = run_compare.serving_build(a, [won(avx512), won(native), won(avx512)])
    assert served == os.path.join(os.path.dirname(benches[1]), "llama-server")
    # A tie keeps the first build, and so does a winner without a llama-server.
    assert run_compare.serving_build(a, [won(avx512), won(native)]) == a.llama_server
    os.remove(served)
    assert run_compare.serving_build(a, [won(avx512)] * 3) == a.llama_server
