"""Kernels from the spec: one source file and one generated test per kernel, the X-macro registry
(kernels.inc) and the per-ISA source lists with their compile flags (kernels.cmake)."""
import os
import tomllib

import jinja2

ISA_ENUM = {"scalar": "WOOLLY_ISA_SCALAR", "avx2": "WOOLLY_ISA_AVX2", "avx512": "WOOLLY_ISA_AVX512",
            "neon": "WOOLLY_ISA_NEON"}
ACT_ENUM = {"f32": "WOOLLY_ACT_F32", "f16": "WOOLLY_ACT_F16", "q8": "WOOLLY_ACT_Q8"}
PROCESSORS = {"any": None, "x86_64": "x86_64|AMD64|amd64", "aarch64": "aarch64|arm64|ARM64"}


def load_spec(root):
    with open(os.path.join(root, "codegen", "kernels.toml"), "rb") as f:
        return tomllib.load(f)


def expand(spec):
    """Every kernel the spec lists, as a dict of template parameters, in spec order."""
    kernels = []
    for entry in spec.get("matmul", []):
        for w in entry["weights"]:
            for act in entry["act"]:
                for tile in entry["tiles"]:
                    mr, nr = (int(v) for v in tile.split("x"))
                    fmt = spec["format"][w]
                    kernels.append(dict(
                        kind="matmul", name=f"{w}_{act}_{entry['op']}_{entry['isa']}_{mr}x{nr}",
                        template=entry["template"], isa=entry["isa"], op=entry["op"],
                        weights=w, wtype=fmt["type"], block=fmt["block"], decode=fmt["decode"],
                        act=act, mr=mr, nr=nr, head_dim=0, max_nmse=entry["max_nmse"],
                        spec_entry=f"[[matmul]] {entry['op']} {entry['isa']} weights={w} act={act} "
                                   f"tile={tile}"))
    for entry in spec.get("attn", []):
        for cache in entry["cache"]:
            for hd in entry["head_dims"]:
                dim = f"d{hd}" if hd else "any"
                kernels.append(dict(
                    kind="attn", name=f"attn_{cache}_flash_{entry['isa']}_{dim}",
                    template=entry["template"], isa=entry["isa"], op="attn", cache=cache,
                    wtype=spec["format"][cache]["type"], act="f32", mr=1, nr=1, head_dim=hd,
                    max_nmse=entry["max_nmse"],
                    spec_entry=f"[[attn]] {entry['isa']} cache={cache} head_dim={hd}"))
    names = [k["name"] for k in kernels]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, f"spec lists kernels twice: {sorted(dup)}"
    for k in kernels:
        assert k["isa"] in spec["isa"], f"{k['name']}: ISA {k['isa']} has no [isa.{k['isa']}] entry"
    return kernels


def render(root):
    spec = load_spec(root)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(root, "templates")),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True)
    kernels = expand(spec)
    out = {}
    for k in kernels:
        out[f"kernels/{k['name']}.c"] = env.get_template(k["template"]).render(k=k)
        test_template = f"test_{k['kind']}.c.j2"
        out[f"tests/test_{k['name']}.c"] = env.get_template(test_template).render(
            k=k, template=test_template)
    isas = [dict(name=name, enum=ISA_ENUM[name], flags=v["flags"], processors=PROCESSORS[v["processors"]],
                 kernels=[k for k in kernels if k["isa"] == name])
            for name, v in spec["isa"].items()]
    out["kernels.inc"] = env.get_template("kernels.inc.j2").render(
        isas=isas, ACT_ENUM=ACT_ENUM, OP_ENUM={"gemv": "WOOLLY_OP_GEMV", "gemm": "WOOLLY_OP_GEMM",
                                               "attn": "WOOLLY_OP_ATTN"})
    out["kernels.cmake"] = env.get_template("kernels.cmake.j2").render(isas=isas)
    return out
