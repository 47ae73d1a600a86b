#!/usr/bin/env python3
"""The current results tables of bench/RESULTS.md (and the README's summary), made from the records in
bench/results/<machine class>.jsonl. Python 3 standard library only.

  bench/results_tables.py add --class C --commit X --command "..." [--other ENGINE [--other-args "..."]]
                              [--date YYYY-MM-DD] [--cpu "..."] [--model NAME] [--note "..."] < OUTPUT
      appends the records of one run to bench/results/C.jsonl. OUTPUT is either what
      `woolly bench --format json` prints (Woolly alone; with --roofline, the machine's limits too), or
      what bench/compare.sh prints (both engines: --other names the one compare.sh ran, ik_llama.cpp or
      llama.cpp, and --other-args the flags given to it with --llama-args).
  bench/results_tables.py render [--check]
      rewrites the generated part of bench/RESULTS.md and of README.md (between their markers) from the
      records; --check writes nothing and fails if either file is not what render gives.

A record is one JSON object per line. Every record has: class, cpu (the machine's CPU line), date, commit
(Woolly's), command (exact, as run), run (the id shared by the records one command gave), source ("run",
or "journal" for figures transcribed from bench/journal/, with journal and section naming where). Then
either a speed record: engine (woolly, ik_llama.cpp, llama.cpp), engine_args (flags given to that engine
beyond the command's tests; "" for none), engine_build (the other engine's commit), model, test (ppN or
tgN), depth, threads, tps (tokens/s: the mean over the runs, or the median where stat says "median"),
and where known std, n (runs), min, max, profile (Woolly's tuning profile: "none" or "tuned") and
roofline (work_rate, unit, limit, percent); or a limits record (kind "limits"): threads, dram_read_gbs,
int8_gmacs, int8_instr, and where measured bf16_gmacs, bf16_instr, f32_gmacs, f32_instr; where the run
sampled its limits more than once (after every round), limit_samples and the lowest samples,
dram_read_gbs_low and int8_gmacs_low, the others being the best. An optional note says anything a reader must know about the figure.

What render shows, per machine class: for every (model, test, depth, threads, engine and its flags) the
newest row (by date, then by place in the file), beside an other engine the Woolly figure of the same
run; then the limits the shown runs measured, and each run's command.
"""
import argparse
import datetime
import glob
import json
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RECORDS = os.path.join(HERE, "results")
RESULTS_MD = os.path.join(HERE, "RESULTS.md")
README_MD = os.path.join(ROOT, "README.md")

# The machine classes, in the order RESULTS.md shows them. The keys are the names of the shipped
# default profiles' CPU classes (tune/defaults/<class>.profile), so that a table and a profile name the
# same machines alike.
CLASSES = [
    ("zen3", "AMD Zen 3", "AVX2 only"),
    ("intel-spr", "Intel Xeon, Sapphire/Emerald Rapids class", "AVX-512 with VNNI, BF16 and FP16"),
    ("zen4", "AMD Zen 4", "AVX-512 with VNNI and BF16"),
    ("zen5", "AMD Zen 5", "AVX-512 with VNNI and BF16"),
]
CLASS_NAMES = {c[0]: c for c in CLASSES}
ENGINES = ("woolly", "ik_llama.cpp", "llama.cpp")
# The benchmark models in the order their tables appear, each with the family it stands for (a table each).
MODEL_FAMILIES = (("llama-1b", "Llama"), ("granite-8b", "Granite"), ("qwen2.5-1.5b", "Qwen2.5"),
                  ("qwen3-4b", "Qwen3"), ("gemma3-1b", "Gemma 3"), ("phi3-mini", "Phi-3"),
                  ("mistral-7b", "Mistral"), ("granitemoe-3b", "Granite MoE"),
                  ("qwen3moe-30b-a3b-12l", "Qwen3 MoE"),
                  # llama-1b's shape in each weight type (a quantization of its F16 file: each record's note says whose)
                  ("llama-1b-Q8_0", "Weight type Q8_0"), ("llama-1b-Q4_0", "Weight type Q4_0"), ("llama-1b-Q4_1", "Weight type Q4_1"),
                  ("llama-1b-Q5_0", "Weight type Q5_0"), ("llama-1b-Q5_1", "Weight type Q5_1"),
                  ("llama-1b-IQ4_NL", "Weight type IQ4_NL"), ("llama-1b-IQ4_XS", "Weight type IQ4_XS"),
                  ("llama-1b-Q3_K_M", "Weight type Q3_K (Q3_K_M)"), ("llama-1b-Q2_K", "Weight type Q2_K"),
                  ("llama-1b-BF16", "Weight type BF16"), ("llama-1b-F16", "Weight type F16"))
MODEL_ORDER = tuple(m for m, _ in MODEL_FAMILIES)

BEGIN = "<!-- results_tables.py render: begin (generated from bench/results/*.jsonl: edit those, then render) -->"
END = "<!-- results_tables.py render: end -->"
SUMMARY_BEGIN = "<!-- results_tables.py summary: begin (generated: bench/results_tables.py render) -->"
SUMMARY_END = "<!-- results_tables.py summary: end -->"

COMMON_FIELDS = ("class", "cpu", "date", "commit", "command", "run", "source")
SPEED_FIELDS = ("engine", "engine_args", "model", "test", "depth", "threads", "tps")
LIMIT_FIELDS = ("threads", "dram_read_gbs")


class RecordError(Exception):
    pass


# ---- reading and checking the records -------------------------------------------------------------------


def check_record(r, where):
    def fail(msg):
        raise RecordError(f"{where}: {msg}")

    if not isinstance(r, dict):
        fail("not a JSON object")
    kind = r.get("kind", "speed")
    need = COMMON_FIELDS + (SPEED_FIELDS if kind == "speed" else LIMIT_FIELDS)
    if kind not in ("speed", "limits"):
        fail(f"kind '{kind}' is neither 'speed' nor 'limits'")
    for k in need:
        if k not in r:
            fail(f"no '{k}'")
    if r["class"] not in CLASS_NAMES:
        fail(f"class '{r['class']}' is not one of {', '.join(CLASS_NAMES)} (add it to CLASSES first)")
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(r["date"])):
        fail(f"date '{r['date']}' is not YYYY-MM-DD")
    if not re.fullmatch(r"[0-9a-f]{7,40}", str(r["commit"])):
        fail(f"commit '{r['commit']}' is not a git commit id")
    if r["source"] not in ("run", "journal"):
        fail(f"source '{r['source']}' is neither 'run' nor 'journal'")
    if r["source"] == "journal" and not (r.get("journal") and r.get("section")):
        fail("a record transcribed from the journal names its journal file and section")
    if not isinstance(r["threads"], int) or r["threads"] < 1:
        fail("threads is not a positive integer")
    if kind == "limits":
        return r
    if r["engine"] not in ENGINES:
        fail(f"engine '{r['engine']}' is not one of {', '.join(ENGINES)}")
    if not re.fullmatch(r"(pp|tg)\d+", str(r["test"])):
        fail(f"test '{r['test']}' is not ppN or tgN")
    if not isinstance(r["depth"], int) or r["depth"] < 0:
        fail("depth is not a count")
    for k in ("tps", "std", "min", "max"):
        if k in r and not (isinstance(r[k], (int, float)) and math.isfinite(r[k]) and r[k] >= 0):
            fail(f"{k} is not a finite number >= 0")
    if r.get("stat", "mean") not in ("mean", "median"):
        fail("stat is neither 'mean' nor 'median'")
    if r["engine"] == "woolly" and r.get("profile", "none") not in ("none", "tuned"):
        fail("profile is neither 'none' nor 'tuned'")
    return r


def journal_sections(name, cache={}):
    """The headings of bench/journal/<name>, or None if there is no such file."""
    if name not in cache:
        path = os.path.join(HERE, "journal", os.path.basename(name))
        try:
            with open(path, encoding="utf-8") as f:
                cache[name] = {line.lstrip("#").strip() for line in f if line.startswith("#")}
        except OSError:
            cache[name] = None
    return cache[name]


def read_records(folder):
    """Every record of every class file, each with its place (file, line) for ordering and messages."""
    records = []
    for path in sorted(glob.glob(os.path.join(folder, "*.jsonl"))):
        name = os.path.basename(path)[: -len(".jsonl")]
        with open(path, encoding="utf-8") as f:
            for i, line in enumerate(f, 1):
                if not line.strip():
                    continue
                where = f"{os.path.relpath(path, ROOT)}:{i}"
                try:
                    r = json.loads(line)
                except ValueError as e:
                    raise RecordError(f"{where}: not JSON: {e}")
                check_record(r, where)
                if r["source"] == "journal":
                    sections = journal_sections(r["journal"])
                    if sections is None:
                        raise RecordError(f"{where}: no journal file bench/journal/{r['journal']}")
                    if r["section"] not in sections:
                        raise RecordError(f"{where}: bench/journal/{r['journal']} has no section '{r['section']}'")
                if r["class"] != name:
                    raise RecordError(f"{where}: a '{r['class']}' record in the file of class '{name}'")
                r["_order"] = (r["date"], name, i)
                records.append(r)
    return records


# ---- formatting -------------------------------------------------------------------------------------------


def test_name(r):
    return f"{r['test']} @ d{r['depth']}" if r["depth"] else r["test"]


def tps_text(r):
    """mean ± std (min-max), as far as they are known and say something (one run has no spread)."""
    s = f"{r['tps']:.2f}"
    if r.get("std") is not None and r.get("n") != 1:
        s += f" ± {r['std']:.2f}"
    if r.get("min") is not None and r.get("max") is not None and r["min"] != r["max"]:
        s += f" ({r['min']:.2f}-{r['max']:.2f})"
    if r.get("stat") == "median":
        s += ", median"
    return s


def engine_text(r):
    return f"{r['engine']} `{r['engine_args']}`" if r["engine_args"] else r["engine"]


def roofline_text(r):
    roof = r.get("roofline")
    if not roof or roof.get("percent") is None:
        return "-"
    s = f"{roof['percent']:.1f}%"
    if roof.get("limit"):
        s += f" of {limit_text(roof['limit'], roof.get('unit', ''))}"
    return s


def limit_text(x, unit):
    """GB/s to two decimals, GMAC/s to one, as the bench prints them."""
    return f"{x:.2f} GB/s" if unit == "GB/s" else f"{x:.1f} {unit}".rstrip()


def model_key(m):
    return (MODEL_ORDER.index(m) if m in MODEL_ORDER else len(MODEL_ORDER), m)


def row_key(r):
    """Where a row sorts: model, depth, prefill before decode, more threads first, then the engines."""
    kind = 0 if r["test"].startswith("pp") else 1
    return (model_key(r["model"]), r["depth"], kind, int(r["test"][2:]), -r["threads"],
            ENGINES.index(r["engine"]) if r["engine"] != "woolly" else len(ENGINES),
            r["engine_args"], r.get("profile", "none"))


# ---- choosing the current rows ----------------------------------------------------------------------------


def newest(records, key):
    """The newest record per key (by date, then by place in the file)."""
    best = {}
    for r in records:
        k = key(r)
        if k not in best or r["_order"] >= best[k]["_order"]:
            best[k] = r
    return list(best.values())


def current(records):
    """(rows, limits) of one class: rows are (other engine record or None, Woolly record)."""
    speed = [r for r in records if r.get("kind", "speed") == "speed"]
    others = [r for r in speed if r["engine"] != "woolly"]
    paired = {(r["run"], r["model"], r["test"], r["depth"], r["threads"]) for r in others}
    woolly_of = {(r["run"], r["model"], r["test"], r["depth"], r["threads"]): r
                 for r in speed if r["engine"] == "woolly"}
    rows = []
    for o in newest(others, lambda r: (r["model"], r["test"], r["depth"], r["threads"], r["engine"],
                                       r["engine_args"])):
        w = woolly_of.get((o["run"], o["model"], o["test"], o["depth"], o["threads"]))
        if w is None:
            raise RecordError(f"{o['class']}: run '{o['run']}' has {o['engine']}'s {test_name(o)} at "
                              f"{o['threads']} threads but no Woolly figure beside it")
        rows.append((o, w))
    alone = [r for r in speed if r["engine"] == "woolly"
             and (r["run"], r["model"], r["test"], r["depth"], r["threads"]) not in paired]
    for w in newest(alone, lambda r: (r["model"], r["test"], r["depth"], r["threads"],
                                      r.get("profile", "none"))):
        rows.append((None, w))
    rows.sort(key=lambda p: row_key(p[0] or p[1]))
    shown_runs = {w["run"] for _, w in rows}
    limits = [r for r in records if r.get("kind") == "limits" and r["run"] in shown_runs]
    limits.sort(key=lambda r: (r["_order"], r["threads"]))
    return rows, limits


# ---- rendering ----------------------------------------------------------------------------------------------


def class_heading(cls):
    key, name, isa = CLASS_NAMES[cls]
    return f"{name} ({isa}): `{key}`"


def render_class(cls, records):
    out = [f"## {class_heading(cls)}", ""]
    if not records:
        out += ["No measurements on this machine class yet.", ""]
        return out
    cpu = max(records, key=lambda r: r["_order"])["cpu"]
    rows, limits = current(records)
    runs = []  # footnotes, in order of first use

    def run_ref(r):
        key = r["run"]
        if key not in [x["run"] for x in runs]:
            runs.append(r)
        return f"[{[x['run'] for x in runs].index(key) + 1}]"

    out += [f"CPU: {cpu}.", ""]
    family = dict(MODEL_FAMILIES)
    model = None
    for o, w in rows:
        if w["model"] != model:
            if model is not None:
                out.append("")
            model = w["model"]
            out += [f"### {family.get(model, model)}: {model}", "",
                    "| model | test | threads | Woolly t/s | % of limit | other engine | its t/s | ratio | "
                    "Woolly at | date | run |",
                    "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | --- | --- | --- |"]
        if o is not None:
            ratio = f"{w['tps'] / o['tps']:.2f}" if o["tps"] > 0 else "-"
            beside, its = engine_text(o), tps_text(o)
        else:
            ratio, its = "-", "-"
            beside = "alone, tuning profile" if w.get("profile") == "tuned" else "alone"
        out.append(f"| {w['model']} | {test_name(w)} | {w['threads']} | {tps_text(w)} | {roofline_text(w)} | "
                   f"{beside} | {its} | {ratio} | `{w['commit']}` | {w['date']} | {run_ref(w)} |")
    out.append("")
    if limits:
        out += ["The machine's limits, as those runs measured them (`woolly bench --roofline`):", "",
                "| threads | DRAM read GB/s | int8 GMAC/s | instruction | BF16 GMAC/s | instruction | F32 GMAC/s | "
                "instruction | Woolly at | date | run |",
                "| ---: | ---: | ---: | --- | ---: | --- | ---: | --- | --- | --- | --- |"]
        for lim in limits:
            dram = f"{lim['dram_read_gbs']:.2f}"
            int8 = f"{lim['int8_gmacs']:.1f}" if lim.get("int8_gmacs") else "-"
            if lim.get("limit_samples", 1) > 1:  # the best of the samples, the lowest beside it
                dram += f" (lowest of {lim['limit_samples']}: {lim['dram_read_gbs_low']:.2f})"
                if lim.get("int8_gmacs_low"):
                    int8 += f" (lowest: {lim['int8_gmacs_low']:.1f})"
            instr = lim.get("int8_instr") or "-"
            bf16 = f"{lim['bf16_gmacs']:.1f}" if lim.get("bf16_gmacs") else "-"
            bf16_instr = lim.get("bf16_instr") if lim.get("bf16_gmacs") else "-"
            f32 = f"{lim['f32_gmacs']:.1f}" if lim.get("f32_gmacs") else "-"
            f32_instr = lim.get("f32_instr") if lim.get("f32_gmacs") else "-"
            out.append(f"| {lim['threads']} | {dram} | {int8} | {instr} | {bf16} | {bf16_instr} | {f32} | "
                       f"{f32_instr} | `{lim['commit']}` | {lim['date']} | {run_ref(lim)} |")
        out.append("")
    out += ["Runs:", ""]
    engines_of = {}
    for r in records:
        if r.get("kind", "speed") == "speed" and r["engine"] != "woolly":
            engines_of.setdefault(r["run"], set()).add((r["engine"], r.get("engine_build") or "?"))
    for i, r in enumerate(runs, 1):
        line = f"{i}. `{r['command']}`, Woolly at `{r['commit']}`, {r['date']}"
        for engine, build in sorted(engines_of.get(r["run"], ())):
            line += f"; {engine} at `{build}`"
        if r["source"] == "journal":
            line += (f"; transcribed from [journal/{r['journal']}](journal/{r['journal']}), "
                     f"\"{r['section']}\"")
        notes = sorted({x["note"] for x in records if x["run"] == r["run"] and x.get("note")})
        for note in notes:
            line += f". {note}"
        out.append(line + ("" if line.endswith(".") else "."))
    out.append("")
    return out


def render_tables(records):
    by_class = {c[0]: [] for c in CLASSES}
    for r in records:
        by_class[r["class"]].append(r)
    out = [BEGIN, ""]
    for cls, _, _ in CLASSES:
        out += render_class(cls, by_class[cls])
    out.append(END)
    return "\n".join(out) + "\n"


def summary_cell(rows, model, kind, family):
    """Woolly's ratio to the faster configuration of an engine family, 2 threads, depth 0."""
    cands = [(o, w) for o, w in rows if o is not None and o["engine"] == family and w["model"] == model
             and w["threads"] == 2 and w["depth"] == 0 and w["test"].startswith(kind)]
    by_config = {}
    for o, w in cands:
        if o["engine_args"] not in by_config or o["_order"] >= by_config[o["engine_args"]][0]["_order"]:
            by_config[o["engine_args"]] = (o, w)
    if not by_config:
        return None
    return max(by_config.values(), key=lambda p: p[0]["tps"])


def render_summary(records):
    out = [SUMMARY_BEGIN,
           "| machine | model | Woolly pp512 / tg128 t/s | Woolly / ik_llama.cpp | Woolly / llama.cpp |",
           "| --- | --- | ---: | ---: | ---: |"]
    for cls, name, isa in CLASSES:
        recs = [r for r in records if r["class"] == cls]
        if not recs:
            out.append(f"| {name} ({isa}) | not measured yet | | | |")
            continue
        # the CPU line's first clause: vendor, family, model
        machine = f"{max(recs, key=lambda r: r['_order'])['cpu'].split(',')[0]}, {isa}"
        rows, _ = current(recs)
        models = sorted({w["model"] for o, w in rows if o is not None}, key=model_key)
        for model in models:
            cells = {}
            for kind in ("pp", "tg"):
                for family in ("ik_llama.cpp", "llama.cpp"):
                    cells[kind, family] = summary_cell(rows, model, kind, family)

            def ratio(kind, family):
                p = cells[kind, family]
                if p is None:
                    return "-"
                o, w = p
                s = f"{w['tps'] / o['tps']:.2f}x"
                return s if w["test"] in ("pp512", "tg128") else f"{s} ({w['test']})"

            def woolly(kind):
                p = cells[kind, "ik_llama.cpp"] or cells[kind, "llama.cpp"]
                if p is None:
                    return "-"
                w = p[1]
                # four figures, never an exponent (a tiny model's 22510 t/s is not 2.251e+04)
                s = f"{w['tps']:.0f}" if w["tps"] >= 1000 else f"{w['tps']:.4g}"
                return s if w["test"] in ("pp512", "tg128") else f"{s} ({w['test']})"

            out.append(f"| {machine} | {model} | {woolly('pp')} / {woolly('tg')} | "
                       f"{ratio('pp', 'ik_llama.cpp')} / {ratio('tg', 'ik_llama.cpp')} | "
                       f"{ratio('pp', 'llama.cpp')} / {ratio('tg', 'llama.cpp')} |")
    out.append(SUMMARY_END)
    return "\n".join(out) + "\n"


def marker_tag(marker):
    """What identifies a marker line: its text up to the end of its first words (the rest explains)."""
    return marker.split(" (")[0].rstrip(" ->")


def replace_between(text, begin, end, new, path):
    """text with the lines from the begin marker's to the end marker's replaced by new."""
    b, e = text.find(marker_tag(begin)), text.find(marker_tag(end))
    if b < 0 or e < 0 or e < b:
        raise RecordError(f"{path}: no '{begin}' ... '{end}' lines to render between")
    b = text.rfind("\n", 0, b) + 1
    line_end = text.find("\n", e)
    tail = text[line_end + 1:] if line_end >= 0 else ""
    return text[:b] + new + tail


def cmd_render(args):
    records = read_records(args.records)
    jobs = [(args.results, BEGIN, END, render_tables(records)),
            (args.readme, SUMMARY_BEGIN, SUMMARY_END, render_summary(records))]
    stale = []
    for path, begin, end, new in jobs:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        result = replace_between(text, begin, end, new, path)
        if result != text:
            stale.append(path)
            if not args.check:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(result)
    if args.check and stale:
        names = " and ".join(os.path.relpath(p, ROOT) for p in stale)
        print(f"results_tables.py: {names} not what the records give: run bench/results_tables.py render",
              file=sys.stderr)
        return 1
    return 0


# ---- adding a run's records ----------------------------------------------------------------------------------


def model_from_path(path):
    name = os.path.basename(path)
    return name[: -len(".gguf")] if name.endswith(".gguf") else name


def stats_of(samples):
    out = {"n": len(samples), "min": min(samples), "max": max(samples)} if samples else {}
    return out


def from_woolly_json(objs, base, model):
    """Speed records (and limits records, with --roofline) from `woolly bench --format json`."""
    records, limits = [], {}
    for o in objs:
        p, g = o.get("n_prompt", 0), o.get("n_gen", 0)
        if (p and g) or not (p or g):
            raise RecordError(f"a test with n_prompt {p} and n_gen {g}: only ppN or tgN tests are kept")
        samples = [s for s in o.get("samples_ts") or [] if s is not None]
        r = dict(base, engine="woolly", engine_args="", model=model or model_from_path(o["model_filename"]),
                 test=f"pp{p}" if p else f"tg{g}", depth=o.get("n_depth", 0), threads=o["n_threads"],
                 tps=round(o["avg_ts"], 2), std=round(o.get("stddev_ts") or 0.0, 2),
                 profile="none" if o.get("tune_profile", "defaults") == "defaults" else "tuned")
        r.update({k: round(v, 2) if isinstance(v, float) else v for k, v in stats_of(samples).items()})
        roof = o.get("roofline")
        if roof:
            r["roofline"] = {"work_rate": round(roof["work_rate"], 2), "unit": roof["work_unit"],
                             "limit": round(roof["limit"], 2), "percent": round(roof["percent_of_limit"], 1)}
            if o["n_threads"] not in limits:
                int8, bf16, f32 = roof.get("int8_gmacs"), roof.get("bf16_gmacs"), roof.get("f32_gmacs")
                limits[o["n_threads"]] = dict(base, kind="limits", threads=o["n_threads"],
                                              dram_read_gbs=round(roof["dram_read_gbs"], 2),
                                              int8_gmacs=round(int8, 1) if int8 else None,
                                              int8_instr=roof.get("int8_instr"),
                                              bf16_gmacs=round(bf16, 1) if bf16 else None,
                                              bf16_instr=roof.get("bf16_instr") if bf16 else None,
                                              f32_gmacs=round(f32, 1) if f32 else None,
                                              f32_instr=roof.get("f32_instr") if f32 else None)
                if roof.get("limit_samples"):
                    low = roof.get("int8_gmacs_low")
                    limits[o["n_threads"]].update(limit_samples=roof["limit_samples"],
                                                  dram_read_gbs_low=round(roof["dram_read_gbs_low"], 2),
                                                  int8_gmacs_low=round(low, 1) if int8 and low else None)
        records.append(r)
    return records + [limits[t] for t in sorted(limits)]


COMPARE_ROW = re.compile(r"^\|([^|]*)\|([^|]*)\|([^|]*)\|\s*(\d+)\s*\|\s*((?:pp|tg)\d+)(?: @ d(\d+))?\s*\|"
                         r"([^|]*)\|([^|]*)\|([^|]*)\|\s*$")
TPS = re.compile(r"^\s*([0-9.]+)(?: ± ([0-9.]+))?\s*$")


def from_compare(text, base, model, other, other_args):
    """Speed records of both engines from bench/compare.sh's table."""
    if other not in ("ik_llama.cpp", "llama.cpp"):
        raise RecordError("compare.sh's output needs --other ik_llama.cpp or --other llama.cpp (which "
                          "engine its llama-bench was)")
    path = re.search(r"^model: (.+)$", text, re.M)
    build = re.search(r"^llama\.cpp: .* \(build ([^,]+), CPU (.*)\)$", text, re.M)
    runs = re.search(r"^runs: (\d+)", text, re.M)
    woolly_line = re.search(r"^woolly: .* \(.*, tuning profile: (.*)\)$", text, re.M)
    if not (path and build and runs and woolly_line):
        raise RecordError("the input is neither woolly bench's JSON nor bench/compare.sh's output")
    model = model or model_from_path(path.group(1).strip())
    profile = "none" if woolly_line.group(1).strip() == "defaults" else "tuned"
    n = int(runs.group(1))
    records = []
    for line in text.splitlines():
        m = COMPARE_ROW.match(line)
        if not m:
            continue
        threads, test, depth = int(m.group(4)), m.group(5), int(m.group(6) or 0)
        for engine, cell, extra in ((other, m.group(7), {"engine_args": other_args,
                                                         "engine_build": build.group(1)}),
                                    ("woolly", m.group(8), {"engine_args": "", "profile": profile})):
            t = TPS.match(cell)
            if not t:
                continue  # "-": this engine did not run the test
            r = dict(base, engine=engine, model=model, test=test, depth=depth, threads=threads,
                     tps=float(t.group(1)), n=n, **extra)
            if t.group(2) is not None:
                r["std"] = float(t.group(2))
            records.append(r)
    if not records:
        raise RecordError("compare.sh's output has no rows of figures")
    return records, build.group(2).strip()


KEY_ORDER = ("kind", "class", "cpu", "date", "commit", "command", "run", "engine", "engine_args", "engine_build",
             "model", "test", "depth", "threads", "tps", "stat", "std", "n", "min", "max", "profile", "roofline",
             "dram_read_gbs", "int8_gmacs", "int8_instr", "bf16_gmacs", "bf16_instr", "f32_gmacs", "f32_instr",
             "limit_samples", "dram_read_gbs_low", "int8_gmacs_low", "source", "journal", "section", "note")


def ordered(r):
    out = {k: r[k] for k in KEY_ORDER if k in r and r[k] is not None}
    out.update({k: v for k, v in r.items() if k not in out and not k.startswith("_") and v is not None})
    return out


def cmd_add(args):
    text = sys.stdin.read()
    path = os.path.join(args.records, f"{args.cls}.jsonl")
    existing = read_records(args.records)
    date = args.date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    run = f"{date}-{args.commit}-{sum(1 for r in existing if r['class'] == args.cls) + 1}"
    base = {"class": args.cls, "cpu": args.cpu, "date": date, "commit": args.commit, "command": args.command,
            "run": run, "source": "run"}
    if args.note:
        base["note"] = args.note
    cpu_info = None
    if text.lstrip().startswith("["):
        try:
            objs = json.loads(text)
        except ValueError as e:
            raise RecordError(f"the input looks like JSON but is not: {e}")
        records = from_woolly_json(objs, base, args.model)
    else:
        records, cpu_info = from_compare(text, base, args.model, args.other, args.other_args)
    if not args.cpu:
        same = [r for r in existing if r["class"] == args.cls]
        cpu = max(same, key=lambda r: r["_order"])["cpu"] if same else cpu_info
        if not cpu:
            raise RecordError(f"no CPU line known for class '{args.cls}': give --cpu")
        for r in records:
            r["cpu"] = cpu
    for i, r in enumerate(records):
        check_record(r, f"new record {i + 1}")
    os.makedirs(args.records, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(ordered(r), ensure_ascii=False) + "\n")
    print(f"results_tables.py: {len(records)} records added to {os.path.relpath(path, ROOT)} (run {run}); "
          "now run bench/results_tables.py render", file=sys.stderr)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", default=RECORDS, help="the folder of <class>.jsonl files")
    sub = ap.add_subparsers(dest="cmd", required=True)
    add = sub.add_parser("add", help="append one run's records (input on stdin)")
    add.add_argument("--class", dest="cls", required=True, choices=list(CLASS_NAMES))
    add.add_argument("--commit", required=True, help="Woolly's commit the run measured")
    add.add_argument("--command", required=True, help="the exact command that gave the input")
    add.add_argument("--date", help="YYYY-MM-DD (default: today, UTC)")
    add.add_argument("--cpu", help="the machine's CPU line (default: the class's newest record's)")
    add.add_argument("--model", help="the model's name (default: its file name without .gguf)")
    add.add_argument("--other", choices=["ik_llama.cpp", "llama.cpp"], help="compare.sh's other engine")
    add.add_argument("--other-args", default="", help="the flags compare.sh gave it (--llama-args)")
    add.add_argument("--note", help="anything a reader must know about these figures")
    ren = sub.add_parser("render", help="rewrite the generated tables of RESULTS.md and README.md")
    ren.add_argument("--check", action="store_true", help="write nothing; fail if either file is stale")
    ren.add_argument("--results", default=RESULTS_MD)
    ren.add_argument("--readme", default=README_MD)
    args = ap.parse_args(argv)
    try:
        return cmd_add(args) if args.cmd == "add" else cmd_render(args)
    except (RecordError, OSError) as e:
        print(f"results_tables.py: {e}", file=sys.stderr)
        return 1
    except KeyError as e:
        print(f"results_tables.py: the input has no field {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
