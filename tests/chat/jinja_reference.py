"""Renders the chat templates of tests/data/chat/ with Python's Jinja2 configured as Hugging Face's
transformers renders chat templates (sandboxed, trim_blocks, lstrip_blocks, loop controls, its tojson,
raise_exception and strftime_now), over conversations with system prompts, multi-turn, content parts,
tools, tool calls and results. tests/test_jinja_reference.c renders the same with Woolly's interpreter
and compares byte for byte.

usage: jinja_reference.py TEMPLATE_DIR OUT_DIR
writes OUT_DIR/<context>.json (the render context), OUT_DIR/<template>.<context>.out (the rendering, or
the exception's message in .err), and OUT_DIR/manifest.txt: one "<template> <context> ok|err" a line.
"""
import datetime
import json
import os
import sys

from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Generation(Extension):
    """{% generation %}...{% endgeneration %}: renders its body (transformers' AssistantTracker)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.Scope(body).set_lineno(lineno)


def raise_exception(message):
    raise Exception(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.datetime.now().strftime(fmt)


TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather",
                                           "parameters": {"type": "object", "properties": {
                                               "city": {"type": "string", "description": "City name"}},
                                               "required": ["city"]}}}]
TOOLS2 = TOOLS + [{"type": "function", "function": {"name": "now", "description": "The time"}},
                  {"type": "function", "function": {"name": "walk", "description": "Walk \"there\"",
                                                    "parameters": {"type": "object", "properties": {
                                                        "to": {"type": "array", "items": {"type": "number"}},
                                                        "fast": {"type": "boolean"}},
                                                        "required": ["to"], "additionalProperties": False}}}]
CALL_PARIS = {"id": "call00001", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
CALL_NOW = {"id": "call00002", "type": "function", "function": {"name": "now", "arguments": {}}}
CONTEXTS = {
    "user": {"messages": [{"role": "user", "content": "Hello there"}], "add_generation_prompt": True},
    "system_user": {"messages": [{"role": "system", "content": "You are terse."},
                                 {"role": "user", "content": "Hi"}], "add_generation_prompt": True},
    "multi_finished": {"messages": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"},
                                    {"role": "assistant", "content": "Hello! How can I help?"},
                                    {"role": "user", "content": "Tell me a joke.\nPlease."},
                                    {"role": "assistant", "content": "No."}],
                       "add_generation_prompt": False},
    "multi_spaces": {"messages": [{"role": "user", "content": "  Hi  "}, {"role": "assistant", "content": " Hello "},
                                  {"role": "user", "content": "Again \"quoted\" \\ {{ x }}"}],
                     "add_generation_prompt": True},
    "parts": {"messages": [{"role": "user", "content": [{"type": "text", "text": "Part one."},
                                                        {"type": "text", "text": "Part two."}]}],
              "add_generation_prompt": True},
    "tools": {"messages": [{"role": "system", "content": "Use tools."},
                           {"role": "user", "content": "Weather in Paris?"}],
              "tools": TOOLS, "add_generation_prompt": True},
    "tool_call": {"messages": [{"role": "user", "content": "Weather in Paris?"},
                               {"role": "assistant", "content": "", "tool_calls": [
                                   {"id": "call_1", "type": "function",
                                    "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
                               {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
                                "content": "{\"temp\": 21}"},
                               {"role": "user", "content": "Thanks"}],
                  "tools": TOOLS, "add_generation_prompt": True},
    # what the server passes for an agent's next step: parallel calls (content empty), their results
    "tool_round": {"messages": [{"role": "system", "content": "Use tools."},
                                {"role": "user", "content": "Weather in Paris, and the time?"},
                                {"role": "assistant", "content": "", "tool_calls": [CALL_PARIS, CALL_NOW]},
                                {"role": "tool", "tool_call_id": "call00001", "name": "get_weather",
                                 "content": "{\"temp\": 21}"},
                                {"role": "tool", "tool_call_id": "call00002", "name": "now", "content": "12:00"}],
                   "tools": TOOLS2, "add_generation_prompt": True},
    "tool_call_text": {"messages": [{"role": "user", "content": "Walk to 1,2"},
                                    {"role": "assistant", "content": "Walking.", "tool_calls": [
                                        {"id": "call00003", "type": "function",
                                         "function": {"name": "walk", "arguments": {"to": [1, 2.5], "fast": True}}}]},
                                    {"role": "tool", "tool_call_id": "call00003", "name": "walk", "content": "done"},
                                    {"role": "assistant", "content": "Arrived."},
                                    {"role": "user", "content": "Now the time?"}],
                       "tools": TOOLS2, "add_generation_prompt": True},
    "tools_no_system": {"messages": [{"role": "user", "content": "What time is it?"}],
                        "tools": TOOLS2, "add_generation_prompt": True},
    "thinking": {"messages": [{"role": "user", "content": "2+2?"},
                              {"role": "assistant", "content": "<think>\nadd\n</think>\n\n4"},
                              {"role": "user", "content": "3+3?"}], "add_generation_prompt": True},
}


def main():
    tdir, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    manifest = []
    for name, ctx in CONTEXTS.items():
        ctx = dict(ctx, bos_token="<s>", eos_token="</s>")
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(ctx, f)
        CONTEXTS[name] = ctx
    for tname in sorted(os.listdir(tdir)):
        if not tname.endswith(".jinja"):
            continue
        with open(os.path.join(tdir, tname)) as f:
            source = f.read()
        try:
            template, syntax_error = env.from_string(source), None
        except Exception as e:  # Jinja2 cannot parse it: every context is refused
            template, syntax_error = None, e
        for cname, ctx in CONTEXTS.items():
            base = os.path.join(out, tname + "." + cname)
            try:
                if syntax_error:
                    raise syntax_error
                text, kind = template.render(**ctx), "ok"
            except Exception as e:  # the template refused the conversation: Woolly must refuse it too
                text, kind = str(e), "err"
            with open(base + "." + kind, "w", newline="") as f:
                f.write(text)
            manifest.append(f"{tname} {cname} {kind}")
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        f.write("\n".join(manifest) + "\n")


main()
