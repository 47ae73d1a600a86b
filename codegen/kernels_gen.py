"""Kernels from the spec: one source file and one generated test per kernel (matmul, attention,
activation packer), per weight layout (its repack routines) and per shared attention decode path, the
X-macro registry (kernels.inc) and the per-ISA source lists with their compile flags (kernels.cmake)."""
import os
import tomllib

import jinja2

ACT_ENUM = {"f32": "WOOLLY_ACT_F32", "f16": "WOOLLY_ACT_F16", "q8": "WOOLLY_ACT_Q8", "bf16": "WOOLLY_ACT_BF16",
           "q8k": "WOOLLY_ACT_Q8K", "i16": "WOOLLY_ACT_I16"}
OP_ENUM = {"gemv": "WOOLLY_OP_GEMV", "gemm": "WOOLLY_OP_GEMM", "attn": "WOOLLY_OP_ATTN", "pack": "WOOLLY_OP_PACK"}
PROCESSORS = {"any": None, "x86_64": "x86_64|AMD64|amd64", "aarch64": "aarch64|arm64|ARM64"}
LAYOUT_KIND = {"row_groups": "WOOLLY_LAYOUT_ROW_GROUPS", "tiles": "WOOLLY_LAYOUT_TILES"}
ROWS = "rows"  # GGUF's own layout: no repack, not named in kernel names
# Attention templates whose kernels share a one-query (decode) path, and the template of that path: it
# depends only on the ISA, the cache, the head dimension, its own KV block ([attn_decode] kv_block, one
# for every tile variant, not the tile's) and whether P V is summed in halves (dot = "f16"), so it is
# compiled once per such tuple (a unit named attn_<cache>_decode_<isa>_d<head dim>_k<KV block>[_fp16],
# not in the registry) and every tile variant calls it.
DECODE_TEMPLATES = {"attn/flash.c.j2": "attn/decode.c.j2"}


def isa_enum(name):
    return f"WOOLLY_ISA_{name.upper()}"


def expand_isas(spec):
    """The ISA levels in spec order (their enum values), each after the level it nests in; exactly one
    level, the first, nests in none (the reference level every slot starts from)."""
    levels, seen = [], set()
    for name, v in spec["isa"].items():
        what = f"[isa.{name}]"
        assert name.isidentifier() and name == name.lower(), f"{what}: a level's name is a lower-case C token"
        assert v["processors"] in PROCESSORS, f"{what}: processors must be one of {sorted(PROCESSORS)}"
        nests = v.get("nests_in")
        if levels:
            assert nests, f"{what}: nests_in is missing (only the first level, {levels[0]['name']}, has none)"
            assert nests in seen, f"{what}: nests_in = {nests!r} must name a level listed before it"
        else:
            assert not nests, f"{what}: the first level is the reference level and nests in none"
        req = v.get("requires", [])
        assert req or not levels, f"{what}: requires is empty, so every CPU would run the level"
        assert len(set(req)) == len(req), f"{what}: requires lists a field twice"
        assert all(r.isidentifier() for r in req), f"{what}: requires names woolly_cpu fields"
        init = v.get("thread_init", "")
        assert not init or init.isidentifier(), f"{what}: thread_init names a C function"
        levels.append(dict(name=name, enum=isa_enum(name), nests_in=nests,
                           nests_in_enum=isa_enum(nests or name), requires=req, thread_init=init,
                           flags=v["flags"], gcc_flags=v.get("gcc_flags", []),
                           processors=PROCESSORS[v["processors"]]))
        seen.add(name)
    return levels


def load_spec(root):
    with open(os.path.join(root, "codegen", "kernels.toml"), "rb") as f:
        return tomllib.load(f)


def features_of(spec, entry, what):
    req = entry.get("requires", [])
    for r in req:
        assert r in spec.get("feature", {}), f"{what}: requires unknown feature {r!r} (no [feature.{r}])"
    return req


def feature_mask(spec, req):
    return " | ".join(spec["feature"][r]["enum"] for r in req) if req else "0"


# A kernel's variant suffix (the name's last part, after the tile or blocks) is derived from its spec
# entry: one token per parameter or feature below that the entry sets, in this order, joined without
# separators (e.g. every_m = 1, wide = 1, prefetch = 4096 -> "sbwpf4k"). Parameters not listed (kc, nc,
# rb, pr, pk: blocking, not a different kernel in kind) stay out of names. `variant = "..."` in an entry
# is the escape hatch for a kernel whose difference is no parameter (BLIS); it may not be combined with
# parameters that name.
VARIANT_TOKENS = (
    ("every_m", lambda v: "sb"),                      # small batches: a tile for every token count
    ("wide", lambda v: "w"),                          # a few tokens walk several row groups at once
    ("split", lambda v: f"s{v}" if v > 1 else ""),    # accumulator chains per (token, group)
    ("unroll", lambda v: f"u{v}" if v > 1 else ""),   # weight blocks per pass of the block loop
    ("prefetch", lambda v: f"pf{v // 1024}k"),        # software prefetch distance in bytes
    ("prefetch_pages", lambda v: "pg"),               # ... a line a 4 KiB page, not every line
    ("prefetch_tokens", lambda v: f"t{v}"),           # ... only for calls of at most this many tokens
    ("pf", lambda v: "pf"),                           # software prefetch (AVX2, distance not named)
    ("dot", lambda v: {"maddubs": "", "f32": "", "vnni": "vnni", "bf16": "bf16", "f16": "fp16",
                       "i16": "i16"}[v]),             # the dot product's instructions or operands
)
FEATURE_TOKENS = {"i8mm": "i8mm"}  # required features that name a variant (others are said by params or types)


def variant_of(entry, what):
    params = entry.get("params", {})
    for key, _ in VARIANT_TOKENS:
        if key in params:
            assert key != "prefetch" or params[key] % 1024 == 0, f"{what}: prefetch is whole KiB"
            assert key not in ("every_m", "wide", "prefetch_pages") or params[key] == 1, \
                f"{what}: {key} is 1 or absent"
    derived = "".join(token(params[key]) for key, token in VARIANT_TOKENS if key in params)
    derived += "".join(FEATURE_TOKENS.get(r, "") for r in entry.get("requires", []))
    if "variant" in entry:
        assert not derived, f"{what}: variant = {entry['variant']!r} beside parameters that name {derived!r}"
        return entry["variant"]
    return derived


def min_tokens_of(entry, w, what):
    """A GEMM's min_tokens: one count for every weight type of the entry, or a table by weights (the
    others 0). Fewer tokens than it, past the 2-16 class, run the plan's 2-16 step (runtime/kernels/
    matmul.h, woolly_matmul_plan_class)."""
    v = entry.get("min_tokens", 0)
    n = v.get(w, 0) if isinstance(v, dict) else v
    assert isinstance(n, int) and n >= 0, f"{what}: min_tokens is a token count"
    assert n == 0 or (entry["op"] == "gemm" and n > 16), f"{what}: min_tokens is for a GEMM past 16 tokens"
    return n


def expand_layouts(spec):
    layouts = {}
    for name, v in spec.get("layout", {}).items():
        fmt = spec["format"][v["format"]]
        assert name.startswith(v["format"] + "_r"), f"layout {name}: name must be <weights>_r<rows>"
        assert name == f"{v['format']}_r{v['rows']}", f"layout {name}: rows = {v['rows']} disagrees with the name"
        assert fmt["block"] > 1 or v["format"] in ("f16", "bf16"), \
            f"layout {name}: only block formats and the 16-bit floats are interleaved"
        assert "encoding" in v, f"layout {name}: no encoding (how its bytes hold the quants)"
        # one repack template per format: the rows and the encoding are its parameters
        layouts[name] = dict(kind="layout", name=name, template=f"repack/{v['format']}.c.j2", isa="scalar",
                             op="repack", weights=v["format"], wtype=fmt["type"], block=fmt["block"],
                             decode=fmt["decode"], rows=v["rows"], block_struct=v["block"],
                             encoding=v["encoding"], contiguous=bool(v.get("contiguous", False)),
                             spec_entry=f"[layout.{name}]")
    return layouts


def expand(spec):
    """Every kernel the spec lists, as a dict of template parameters, in spec order."""
    layouts = expand_layouts(spec)
    kernels = []
    for entry in spec.get("matmul", []):
        layout = entry.get("layout", ROWS)
        req = features_of(spec, entry, f"[[matmul]] {entry['op']} {entry['isa']}")
        variant = variant_of(entry, f"[[matmul]] {entry['op']} {entry['isa']}")
        for w in entry["weights"]:
            lay = None
            if layout != ROWS:
                lay = layouts.get(f"{w}_{layout}")
                assert lay, f"[[matmul]] {entry['op']} {entry['isa']}: no layout {w}_{layout}"
            for act in entry["act"]:
                for tile in entry["tiles"]:
                    mr, nr = (int(v) for v in tile.split("x"))
                    if lay:
                        assert nr % lay["rows"] == 0, f"{w} {layout}: tile {tile} is not whole row groups"
                    fmt = spec["format"][w]
                    name = f"{w}_{act}_{entry['op']}_{entry['isa']}"
                    name += ("" if layout == ROWS else f"_{layout}") + f"_{mr}x{nr}"
                    name += f"_{variant}" if variant else ""
                    kernels.append(dict(
                        kind="matmul", name=name, template=entry["template"], isa=entry["isa"],
                        op=entry["op"], weights=w, wtype=fmt["type"], block=fmt["block"],
                        decode=fmt["decode"], act=act, act_enum=ACT_ENUM[act], mr=mr, nr=nr, head_dim=0,
                        layout=layout, layout_name=lay["name"] if lay else ROWS,
                        layout_rows=lay["rows"] if lay else 1, block_struct=lay["block_struct"] if lay else "",
                        params=entry.get("params", {}), requires=req, features=feature_mask(spec, req),
                        default=bool(entry.get("default", False)),
                        small_default=bool(entry.get("small_default", False)),
                        min_tokens=min_tokens_of(entry, w, f"[[matmul]] {entry['op']} {entry['isa']}"),
                        max_nmse=entry["max_nmse"],
                        spec_entry=f"[[matmul]] {entry['op']} {entry['isa']} weights={w} act={act} "
                                   f"layout={layout} tile={tile}" + (f" variant={variant}" if variant else "")))
    decode_bk = spec["attn_decode"]["kv_block"]
    assert decode_bk in (32, 64, 128), "[attn_decode] kv_block is 32, 64 or 128 cache positions"
    for entry in spec.get("attn", []):
        req = features_of(spec, entry, f"[[attn]] {entry['isa']}")
        blocks = entry.get("blocks", [])
        variant = variant_of(entry, f"[[attn]] {entry['isa']}")
        # the tiles' operands: F32, rounded to BF16 (both products), P V in F16, or int16 (both products)
        dot = entry.get("params", {}).get("dot", "f32")
        assert dot in ("f32", "bf16", "f16", "i16"), f"[[attn]] {entry['isa']}: dot must be f32, bf16, f16 or i16"
        if "default" in entry:
            assert entry["default"] in blocks, f"[[attn]] {entry['isa']}: default must be one of {blocks}"
        for cache in entry["cache"]:
            for hd in entry["head_dims"]:
                dim = f"d{hd}" if hd else "any"
                for blk in blocks or [None]:
                    bq, bk = (int(v) for v in blk.split("x")) if blk else (1, 1)
                    name = f"attn_{cache}_flash_{entry['isa']}_{dim}" + (f"_b{blk}" if blk else "")
                    name += f"_{variant}" if variant else ""
                    pv = "f16" if dot == "f16" else "f32"  # how the one-query path sums P V
                    decode = None
                    # a level may take the one-query path of the level it nests in (amx: its tiles pay
                    # for many queries only)
                    decode_isa = entry.get("decode_isa", entry["isa"])
                    assert decode_isa in (entry["isa"], spec["isa"][entry["isa"]].get("nests_in")), \
                        f"[[attn]] {entry['isa']}: decode_isa is its level or the one it nests in"
                    if entry["template"] in DECODE_TEMPLATES:
                        decode = f"attn_{cache}_decode_{decode_isa}_d{hd}_k{decode_bk}" + ("_fp16" if pv == "f16" else "")
                    kernels.append(dict(
                        kind="attn", name=name, template=entry["template"], isa=entry["isa"], op="attn",
                        decode=decode, decode_isa=decode_isa, decode_nr=decode_bk, pv=pv,
                        cache=cache, wtype=spec["format"][cache]["type"], act=dot, act_enum=ACT_ENUM[dot],
                        mr=bq, nr=bk, head_dim=hd,
                        layout=ROWS, layout_name=ROWS, requires=req, features=feature_mask(spec, req),
                        default=blk is not None and blk == entry.get("default"), params=entry.get("params", {}),
                        max_nmse=entry["max_nmse"],
                        spec_entry=f"[[attn]] {entry['isa']} cache={cache} head_dim={hd}"
                                   + (f" blocks={blk}" if blk else "") + (f" variant={variant}" if variant else "")))
    for entry in spec.get("pack", []):
        req = features_of(spec, entry, f"[[pack]] {entry['isa']}")
        for act in entry["act"]:
            kernels.append(dict(
                kind="pack", name=f"pack_{act}_{entry['isa']}", template=entry["template"],
                isa=entry["isa"], op="pack", act=act, act_enum=ACT_ENUM[act], wtype="WOOLLY_TYPE_F32", mr=1, nr=1,
                head_dim=0,
                layout=ROWS, layout_name=ROWS, requires=req, features=feature_mask(spec, req),
                default=False, params=entry.get("params", {}),
                spec_entry=f"[[pack]] {entry['isa']} act={act}"))
    for entry in spec.get("ops", []):
        req = features_of(spec, entry, f"[[ops]] {entry['isa']}")
        for op in entry["ops"]:
            kernels.append(dict(
                kind="ops", name=f"ops_{op}_{entry['isa']}", template=entry["template"], isa=entry["isa"],
                op=op, act="f32", wtype="WOOLLY_TYPE_F32", mr=1, nr=1, head_dim=0, layout=ROWS, layout_name=ROWS,
                requires=req, features=feature_mask(spec, req), default=False, params=entry.get("params", {}),
                max_nmse=entry["max_nmse"], spec_entry=f"[[ops]] {entry['isa']} op={op}"))
    names = [k["name"] for k in kernels]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, f"spec lists kernels twice (or two entries' parameters derive one name): {sorted(dup)}"
    for k in kernels:
        assert k["isa"] in spec["isa"], f"{k['name']}: ISA {k['isa']} has no [isa.{k['isa']}] entry"
    nests = {name: v.get("nests_in") for name, v in spec["isa"].items()}
    check_defaults(kernels, nests)
    check_attn_defaults(kernels)
    return kernels, list(layouts.values())


def check_defaults(kernels, nests):
    """Per (weights, ISA) with any default matmul kernel (and always at the scalar level): exactly one
    default GEMV and one default GEMM, with the same activation format and layout, so that a tensor
    repacked for its default GEMV has a GEMM too. A level without defaults for some weights (only
    candidates for the tuner) leaves them the default of the level below; one with a default GEMM alone
    (amx: decode stays on the avx512 GEMV) leaves them the GEMV of the nearest level below that has one,
    whose activations and layout its GEMM must take. `nests`: each level's nests_in."""
    def levels_from(isa):
        """isa and the levels it nests in, nearest first."""
        while isa:
            yield isa
            isa = nests.get(isa)

    groups = {}
    for k in kernels:
        if k["kind"] == "matmul":
            groups.setdefault((k["weights"], k["isa"]), []).append(k)
    for (w, isa), ks in groups.items():
        d = {op: [k for k in ks if k["op"] == op and k["default"]] for op in ("gemv", "gemm")}
        if isa != "scalar" and not d["gemv"] and not d["gemm"]:
            continue  # candidates only: these weights keep the default of a lower level
        if not d["gemv"]:  # a level of GEMMs alone: the nearest level's default GEMV
            d["gemv"] = next(filter(None, ([k for k in groups.get((w, l), []) if k["op"] == "gemv" and k["default"]]
                                           for l in levels_from(nests.get(isa)))), [])
        for op in ("gemv", "gemm"):
            assert len(d[op]) == 1, f"{w} at {isa}: {len(d[op])} default {op} kernels (need exactly one)"
        v, m = d["gemv"][0], d["gemm"][0]
        assert (v["act"], v["layout"]) == (m["act"], m["layout"]), \
            f"{w} at {isa}: default GEMV {v['name']} and GEMM {m['name']} differ in activations or layout"
        # The default in place of the level's for 2-16 tokens: a small-batch GEMM. (A CPU class's
        # defaults are its shipped profile's, tune/defaults/, which the runtime checks the same way.)
        # One per activation format: a matrix whose model prefers another format than the default
        # GEMV's (Q8_0 beside K-quants, on int8) takes that format's first listed GEMM for prompts and
        # its small_default for 2-16 tokens (woolly_kernel_choose_small).
        for k in ks:
            assert not k["small_default"] or k["op"] == "gemm", f"{k['name']}: small_default is for a GEMM"
        for act in {k["act"] for k in ks}:
            alt = [k for k in ks if k["small_default"] and k["act"] == act]
            assert len(alt) <= 1, \
                f"{w} at {isa}: {len(alt)} small_default GEMM kernels on {act} (need at most one)"
            for a in alt:
                assert a["params"].get("every_m") or a["mr"] <= 8, \
                    f"{a['name']}: a small_default GEMM is a small-batch tile (params every_m, or at most 8 tokens)"
                assert act != v["act"] or a["layout"] == v["layout"], \
                    f"{w} at {isa}: small_default {a['name']} and default GEMV {v['name']} differ in layout"
                assert any(g["op"] == "gemv" and (g["act"], g["layout"]) == (act, a["layout"]) for g in ks), \
                    f"{w} at {isa}: small_default {a['name']} has no GEMV of its activations and layout"
    # A layout's kernels at a level: a GEMV and a GEMM, at that level or (the GEMV) one it nests in. The
    # GEMV chooses the layout, so a GEMM may take another activation format than the layout's GEMV (the
    # runtime packs each step's activations in its kernel's format): q4k_q8k_gemm_amx_r16 on the
    # avx512 level's q8 GEMV.
    for k in kernels:
        if k["kind"] == "matmul" and k["layout"] != ROWS:
            below = set(levels_from(k["isa"]))
            same = [o for o in kernels if o["kind"] == "matmul" and o["weights"] == k["weights"]
                    and (o["act"] == k["act"] or (o["op"] == "gemv") != (k["op"] == "gemv"))
                    and o["layout"] == k["layout"]
                    and (o["isa"] == k["isa"] or (o["op"] == "gemv" and o["isa"] in below))]
            ops = {o["op"] for o in same}
            assert ops == {"gemv", "gemm"}, f"{k['name']}: layout {k['layout']} needs both a GEMV and a GEMM"


def check_attn_defaults(kernels):
    """Per (cache, ISA, head dim, operand format) with tiled attention kernels: exactly one default (the
    block sizes the runtime uses without a tuning profile)."""
    groups = {}
    for k in kernels:
        if k["kind"] == "attn" and k["head_dim"]:
            groups.setdefault((k["cache"], k["isa"], k["head_dim"], k["act"]), []).append(k)
    for (cache, isa, hd, act), ks in groups.items():
        n = sum(k["default"] for k in ks)
        assert n == 1, f"attention {cache} d{hd} {act} at {isa}: {n} defaults (need exactly one)"


def expand_decodes(spec, kernels):
    """The one-query paths the tiled attention kernels share, one unit per name their kernels give
    (DECODE_TEMPLATES), in spec order. A unit is compiled with the CPU features every kernel that calls
    it requires (the FP16 P V's avx512fp16; not the BF16 tiles' avx512bf16, which the F32 path they share
    with the F32 tiles does not use), and tested at the tightest bound of its kernels, whose tests run
    the same code."""
    units = {}
    for k in kernels:
        if k["kind"] != "attn" or not k.get("decode"):
            continue
        u = units.get(k["decode"])
        if u is None:
            u = units[k["decode"]] = dict(
                kind="attn_decode", name=k["decode"], template=DECODE_TEMPLATES[k["template"]], isa=k["decode_isa"],
                op="attn", cache=k["cache"], wtype=k["wtype"], head_dim=k["head_dim"], nr=k["decode_nr"], pv=k["pv"],
                requires=list(k["requires"]), max_nmse=k["max_nmse"], callers=[],
                spec_entry=f"[[attn]] {k['decode_isa']} cache={k['cache']} head_dim={k['head_dim']} "
                           f"[attn_decode] kv_block={k['decode_nr']}"
                           + (" dot=f16" if k["pv"] == "f16" else ""))
        assert (u["isa"], u["cache"], u["head_dim"], u["nr"], u["pv"]) == \
            (k["decode_isa"], k["cache"], k["head_dim"], k["decode_nr"], k["pv"]), f"{k['name']}: decode {u['name']} is not its own"
        u["requires"] = [r for r in u["requires"] if r in k["requires"]]
        u["max_nmse"] = min(u["max_nmse"], k["max_nmse"])
        u["callers"].append(k["name"])
    for u in units.values():
        u["features"] = feature_mask(spec, u["requires"])
    return list(units.values())


def render(root):
    spec = load_spec(root)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(root, "templates")),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True)
    kernels, layouts = expand(spec)
    out = {}
    for k in kernels:
        out[f"kernels/{k['name']}.c"] = env.get_template(k["template"]).render(k=k)
        test_template = f"tests/{k['kind']}.c.j2"
        out[f"tests/test_{k['name']}.c"] = env.get_template(test_template).render(
            k=k, template=test_template, isa_enum=isa_enum(k["isa"]))
    decodes = expand_decodes(spec, kernels)
    for u in decodes:
        out[f"kernels/{u['name']}.c"] = env.get_template(u["template"]).render(k=u)
        out[f"tests/test_{u['name']}.c"] = env.get_template("tests/attn_decode.c.j2").render(
            k=u, template="tests/attn_decode.c.j2", isa_enum=isa_enum(u["isa"]))
    for lay in layouts:
        out[f"kernels/repack_{lay['name']}.c"] = env.get_template(lay["template"]).render(k=lay)
        out[f"tests/test_repack_{lay['name']}.c"] = env.get_template("tests/repack.c.j2").render(
            k=lay, template="tests/repack.c.j2")
    feature_flags = {n: v["flag"] for n, v in spec.get("feature", {}).items()}
    isas = expand_isas(spec)
    for isa in isas:
        name = isa["name"]
        ks = [k for k in kernels if k["isa"] == name]
        # what the level compiles: its kernels, the decode paths they share and (the reference level)
        # the layouts' repack routines (portable C), each file with its test
        units = ks + [u for u in decodes if u["isa"] == name] + (layouts if not isa["nests_in"] else [])
        groups = {}  # one compile group per set of required CPU features, in spec order
        for u in units:
            file = ("repack_" if u["kind"] == "layout" else "") + u["name"]
            req = tuple(u.get("requires", []))
            g = groups.setdefault(req, dict(
                id="_".join([name] + list(req)).upper(), features=list(req),
                extra_flags=[feature_flags[r] for r in req], files=[]))
            g["files"].append(file)
        isa.update(kernels=ks, groups=list(groups.values()),
                   files=[f for g in groups.values() for f in g["files"]])
    for lay in layouts:
        kind = spec.get("layout", {}).get(lay["name"], {}).get("kind", "row_groups")
        assert kind in LAYOUT_KIND, f"[layout.{lay['name']}]: kind must be one of {sorted(LAYOUT_KIND)}"
        lay["kind_enum"] = LAYOUT_KIND[kind]
    features = [dict(name=n, enum=v["enum"], flag=v["flag"]) for n, v in spec.get("feature", {}).items()]
    out["kernels.inc"] = env.get_template("kernels.inc.j2").render(
        isas=isas, layouts=layouts, ACT_ENUM=ACT_ENUM, OP_ENUM=OP_ENUM)
    out["kernels.cmake"] = env.get_template("kernels.cmake.j2").render(isas=isas, features=features)
    out["isa.inc"] = env.get_template("isa.inc.j2").render(isas=isas)
    return out
