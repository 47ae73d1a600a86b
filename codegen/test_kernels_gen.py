#!/usr/bin/env python3
"""The generator's naming rule: a kernel's variant suffix is derived from its spec entry's parameters
(kernels_gen.VARIANT_TOKENS), in one fixed order, and expand() refuses a spec whose entries derive one
name twice or type a variant beside parameters that name one; and the attention decode units the tiled
kernels share (expand_decodes). Run by ctest (test_codegen)."""
import copy
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import kernels_gen  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def matmul_entry(**extra):
    entry = dict(template="t.c.j2", isa="avx512", op="gemm", weights=["q4k"], act=["q8"], layout="r16",
                 tiles=["7x16"], max_nmse=1e-11)
    entry.update(extra)
    return entry


class VariantNames(unittest.TestCase):
    def test_each_parameter_gives_its_token(self):
        v = kernels_gen.variant_of
        self.assertEqual(v({"params": {"every_m": 1}}, "x"), "sb")
        self.assertEqual(v({"params": {"wide": 1}}, "x"), "w")
        self.assertEqual(v({"params": {"split": 2}}, "x"), "s2")
        self.assertEqual(v({"params": {"split": 1}}, "x"), "")
        self.assertEqual(v({"params": {"unroll": 8}}, "x"), "u8")
        self.assertEqual(v({"params": {"split": 2, "unroll": 8, "prefetch": 2048}}, "x"), "s2u8pf2k")
        self.assertEqual(v({"params": {"prefetch": 3 * 1024}}, "x"), "pf3k")
        self.assertEqual(v({"params": {"pf": 512}}, "x"), "pf")
        self.assertEqual(v({"params": {"dot": "maddubs"}}, "x"), "")
        self.assertEqual(v({"params": {"dot": "vnni"}, "requires": ["avxvnni"]}, "x"), "vnni")
        self.assertEqual(v({"params": {"dot": "f16"}}, "x"), "fp16")
        self.assertEqual(v({"requires": ["i8mm"]}, "x"), "i8mm")

    def test_blocking_parameters_are_not_named(self):
        self.assertEqual(kernels_gen.variant_of({"params": {"kc": 256, "nc": 96, "rb": 128}}, "x"), "")

    def test_tokens_follow_the_rule_order_not_the_entry_order(self):
        a = kernels_gen.variant_of({"params": {"prefetch": 4096, "wide": 1, "every_m": 1}}, "x")
        b = kernels_gen.variant_of({"params": {"every_m": 1, "wide": 1, "prefetch": 4096}}, "x")
        self.assertEqual(a, b)
        self.assertTrue(a.startswith("sb") and a.endswith("pf4k"), a)

    def test_typed_variant_is_kept_only_where_no_parameter_names(self):
        self.assertEqual(kernels_gen.variant_of({"variant": "blis", "params": {"pr": 64}}, "x"), "blis")
        with self.assertRaises(AssertionError):
            kernels_gen.variant_of({"variant": "pf", "params": {"prefetch": 2048}}, "x")

    def test_prefetch_must_be_whole_kib(self):
        with self.assertRaises(AssertionError):
            kernels_gen.variant_of({"params": {"prefetch": 1000}}, "x")


class MinTokens(unittest.TestCase):
    def test_one_count_or_a_table_by_weights(self):
        self.assertEqual(kernels_gen.min_tokens_of(matmul_entry(min_tokens=64), "q4k", "x"), 64)
        table = matmul_entry(weights=["q4k", "q6k"], min_tokens={"q6k": 96})
        self.assertEqual(kernels_gen.min_tokens_of(table, "q6k", "x"), 96)
        self.assertEqual(kernels_gen.min_tokens_of(table, "q4k", "x"), 0)

    def test_only_a_gemm_past_sixteen_tokens(self):
        for entry in (matmul_entry(op="gemv", min_tokens=64), matmul_entry(min_tokens=16),
                      matmul_entry(min_tokens=-1)):
            with self.assertRaises(AssertionError):
                kernels_gen.min_tokens_of(entry, "q4k", "x")


class SpecNames(unittest.TestCase):
    def setUp(self):
        self.spec = kernels_gen.load_spec(ROOT)

    def test_the_spec_expands_to_unique_names(self):
        kernels, _ = kernels_gen.expand(self.spec)
        names = [k["name"] for k in kernels]
        self.assertEqual(len(names), len(set(names)))

    def test_derived_names_end_with_their_variant(self):
        kernels, _ = kernels_gen.expand(self.spec)
        for k in kernels:
            if k["kind"] == "matmul" and k["params"].get("every_m"):
                self.assertIn("_sb", k["name"])

    def test_two_entries_that_derive_one_name_are_refused(self):
        spec = copy.deepcopy(self.spec)
        # the same kernel again, differing only in a parameter that names nothing
        spec["matmul"].append(matmul_entry(params={"every_m": 1, "kc": 512}))
        spec["matmul"].append(matmul_entry(params={"every_m": 1, "kc": 1024}))
        with self.assertRaises(AssertionError) as e:
            kernels_gen.expand(spec)
        self.assertIn("twice", str(e.exception))

    def test_a_level_of_gemms_alone_takes_the_gemv_layout_of_the_level_below(self):
        # amx has GEMMs and no GEMV: a default GEMM of it must read what the nearest level's default GEMV
        # reads. None is a default in the spec (they measured slower); this copy makes the first one a
        # default. With Q8_0's avx512 defaults taken out (this copy only), its default GEMV is avx2's
        # (r8), so an amx default on q80_r16 is refused.
        spec = copy.deepcopy(self.spec)
        for e in spec["matmul"]:
            if e["isa"] == "avx512" and "q80" in e["weights"] and (e.get("default") or e.get("small_default")):
                if e["weights"] == ["q80"]:
                    e.pop("default", None)
                    e.pop("small_default", None)
                else:
                    e["weights"] = [w for w in e["weights"] if w != "q80"]
        amx = [e for e in spec["matmul"] if e["isa"] == "amx" and "q4k" in e["weights"]]
        self.assertTrue(amx)
        amx[0]["default"] = True
        kernels_gen.expand(spec)  # consistent without them
        amx[0]["weights"] = amx[0]["weights"] + ["q80"]
        with self.assertRaises(AssertionError) as e:
            kernels_gen.expand(spec)
        self.assertIn("differ in activations or layout", str(e.exception))


class DecodeUnits(unittest.TestCase):
    """The tiled attention kernels' one-query path, compiled once per unit that kernels_gen.expand_decodes
    derives: the kernels that share it differ only in what the path does not read (their query and KV
    blocks, their tiles' operands), its KV block being the spec's [attn_decode] kv_block."""

    def setUp(self):
        spec = kernels_gen.load_spec(ROOT)
        self.kernels, _ = kernels_gen.expand(spec)
        self.units = {u["name"]: u for u in kernels_gen.expand_decodes(spec, self.kernels)}
        self.kv_block = spec["attn_decode"]["kv_block"]
        self.nests_in = {name: v.get("nests_in") for name, v in spec["isa"].items()}

    def test_every_tiled_kernel_calls_a_unit_of_its_own_parameters(self):
        tiled = [k for k in self.kernels
                 if k["kind"] == "attn" and k["template"] in kernels_gen.DECODE_TEMPLATES]
        self.assertTrue(tiled)
        for k in tiled:
            u = self.units[k["decode"]]
            # its own level's path, or (amx) the one of the level it names in decode_isa, which it nests in
            self.assertEqual((u["isa"], u["cache"], u["head_dim"], u["nr"]),
                             (k["decode_isa"], k["cache"], k["head_dim"], self.kv_block))
            if k["decode_isa"] != k["isa"]:
                self.assertEqual(self.nests_in[k["isa"]], k["decode_isa"], k["name"])
            self.assertEqual(u["pv"] == "f16", k["params"].get("dot") == "f16", k["name"])
            self.assertIn(k["name"], u["callers"])
            self.assertTrue(set(u["requires"]) <= set(k["requires"]),
                            f"{u['name']} needs more than {k['name']}")
        self.assertLess(len(self.units), len(tiled))

    def test_query_blocks_and_tile_operands_share_a_unit_but_fp16_p_v_does_not(self):
        u = self.units["attn_f16_decode_avx512_d64_k64"]
        self.assertIn("attn_f16_flash_avx512_d64_b32x64", u["callers"])
        self.assertIn("attn_f16_flash_avx512_d64_b16x64", u["callers"])
        self.assertIn("attn_f16_flash_avx512_d64_b32x64_bf16", u["callers"])
        self.assertEqual(u["requires"], [])  # the BF16 tiles' feature is not the path's
        self.assertEqual(self.units["attn_f16_decode_avx512_d64_k64_fp16"]["requires"], ["avx512fp16"])
        avx2 = self.units["attn_f16_decode_avx2_d64_k64"]
        self.assertIn("attn_f16_flash_avx2_d64_b32x64_i16", avx2["callers"])

    def test_kv_blocks_of_the_tiles_share_one_unit(self):
        u = self.units[f"attn_q80_decode_avx2_d128_k{self.kv_block}"]
        for tile in ("8x32", "8x64", "8x128", "32x64"):
            self.assertIn(f"attn_q80_flash_avx2_d128_b{tile}", u["callers"])
        self.assertEqual(len({k["nr"] for k in self.kernels if k["name"] in u["callers"]}), 3)

    def test_a_unit_is_tested_at_the_tightest_bound_of_its_kernels(self):
        for u in self.units.values():
            bounds = [k["max_nmse"] for k in self.kernels if k["name"] in u["callers"]]
            self.assertEqual(u["max_nmse"], min(bounds), u["name"])


if __name__ == "__main__":
    unittest.main()
