#!/usr/bin/env python3
"""Golden outputs for tokamak's chat-template engine (src/tokenizer/chat/).

Renders every template in tests/fixtures/chat_templates/*.jinja with the Python `jinja2`
package, configured the way Hugging Face transformers' apply_chat_template configures it,
over a fixed set of conversations, and writes tests/golden/chat_templates/<name>.json.
tests/chat/chat_template_golden_test.cpp renders the same cases with the C++ engine and
requires byte-identical output, and an exception wherever Python raised one.

The environment (transformers, utils/chat_template_utils.py, _compile_jinja_template):
  * jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
    extensions=[<{% generation %} block>, jinja2.ext.loopcontrols])
  * filters["tojson"] = json.dumps(x, ensure_ascii=False, indent=indent,
    separators=separators, sort_keys=sort_keys)   (replaces Jinja's HTML-safe tojson)
  * globals["raise_exception"] raises jinja2.exceptions.TemplateError(message)
  * globals["strftime_now"](fmt) = datetime.now().strftime(fmt); here a fixed date
    (2024-07-26 12:00 local time) so goldens are reproducible; the C++ test injects the same.
  * render(messages=..., tools=None, documents=None, add_generation_prompt=..., **kwargs)
    where kwargs are the special tokens (bos_token, eos_token) and any extra variables.
Jinja2 3.1.x defaults otherwise: Undefined (not StrictUndefined), keep_trailing_newline=False.

If transformers is importable, the script also renders every case through transformers'
own compiled template (its clock pinned to the same date) and fails on any difference,
which checks the environment above against the real thing (last run: transformers 5.24.0,
0 differences over all 660 cases).

Usage: python3 scripts/golden_chat_templates.py [--check]   (--check: compare, write nothing)
Requires: jinja2 (3.1.x).
"""

import argparse
import datetime
import json
import pathlib
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "chat_templates"
GOLDEN = ROOT / "tests" / "golden" / "chat_templates"
FIXED_NOW = datetime.datetime(2024, 7, 26, 12, 0, 0)


class RaisedByTemplate(TemplateError):
    """What raise_exception() raises: a TemplateError, as in transformers, but told apart from
    Jinja's own errors (UndefinedError is a TemplateError too) so the goldens can record it."""


class GenerationBlock(jinja2.ext.Extension):
    """transformers' {% generation %}...{% endgeneration %}: renders its body unchanged (the
    real extension also records where assistant text starts and ends, for masks)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_render_body")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def make_environment():
    def raise_exception(message):
        raise RaisedByTemplate(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return FIXED_NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


# Special tokens per template family, as their tokenizers define them.
TOKENS = {
    "smollm2": ("<|im_start|>", "<|im_end|>"),
    "llama2": ("<s>", "</s>"),
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3_1": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3_2": ("<|begin_of_text|>", "<|eot_id|>"),
    "qwen2": ("", "<|im_end|>"),
    "qwen2_5": ("", "<|im_end|>"),
    "gemma2": ("<bos>", "<eos>"),
    "gemma3": ("<bos>", "<eos>"),
    "mistral_v0_1": ("<s>", "</s>"),
    "mistral_v0_3": ("<s>", "</s>"),
    "phi3": ("<s>", "<|endoftext|>"),
    "deepseek_r1_distill": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "deepseek_coder": ("<｜begin▁of▁sentence｜>", "<|EOT|>"),
    "command_r": ("<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
}


def msg(role, content):
    return {"role": role, "content": content}


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}

# (name, messages, extra variables). Each is rendered with and without add_generation_prompt.
CONVERSATIONS = [
    ("single_user", [msg("user", "Hello!")], {}),
    ("system_user", [msg("system", "You are a helpful assistant."), msg("user", "What is 2+2?")], {}),
    ("multi_turn", [msg("user", "Hi"), msg("assistant", "Hello! How can I help?"),
                    msg("user", "Tell me a joke.")], {}),
    ("system_multi_turn", [msg("system", "Be brief."), msg("user", "Capital of France?"),
                           msg("assistant", "Paris."), msg("user", "And of Italy?"),
                           msg("assistant", "Rome.")], {}),
    ("empty_content", [msg("user", "")], {}),
    ("empty_system_and_user", [msg("system", ""), msg("user", ""), msg("assistant", "")], {}),
    ("unicode", [msg("system", "Réponds en français, s'il te plaît."),
                 msg("user", "Héllo wörld — 你好 🌍👋🏽 ñ\u00a0\u2028x"),
                 msg("assistant", "Привет! 😀 日本語もOK"), msg("user", "Ελληνικά; עברית? 🏳️‍🌈")], {}),
    ("jinja_like_content", [msg("user", "{{ messages }} {% if x %}y{% endif %} {# c #} {{- raw -}}"),
                            msg("assistant", "{% raw %}{{ not a tag }}{% endraw %}"),
                            msg("user", "<|im_end|> [INST] <<SYS>> {%- -%}")], {}),
    ("whitespace_content", [msg("system", "  padded system  \n"), msg("user", "\n\n  lots of space \t \n"),
                            msg("assistant", "\tanswer with tabs\t\n\n"), msg("user", " trailing  ")], {}),
    ("quotes_and_escapes", [msg("user", "He said \"hi\" and 'bye' \\ back\\slash \\n not a newline\nreal newline"),
                            msg("assistant", "Tab\there, null-ish: None, true, {}")], {}),
    ("think_tags", [msg("user", "Solve it."), msg("assistant", "<think>\nreasoning\n</think>\n\nThe answer is 4."),
                    msg("user", "Thanks")], {}),
    ("long_conversation", [m for i in range(6) for m in (msg("user", f"Question {i}?"),
                                                         msg("assistant", f"Answer {i}."))] +
     [msg("user", "Last question?")], {}),
    ("system_only", [msg("system", "Only a system prompt.")], {}),
    ("no_messages", [], {}),
    ("consecutive_users", [msg("user", "First"), msg("user", "Second")], {}),
    ("assistant_first", [msg("assistant", "I speak first"), msg("user", "OK")], {}),
    ("system_in_the_middle", [msg("user", "Hi"), msg("system", "New instructions"), msg("user", "Go")], {}),
    ("tool_result_message", [msg("user", "Weather in Paris?"), msg("tool", "{\"temp\": 21}")], {}),
    ("date_string_variable", [msg("system", "Sys"), msg("user", "Today?")], {"date_string": "01 Jan 2025"}),
    ("with_tools", [msg("system", "You can call tools."), msg("user", "Weather in Paris?")],
     {"tools": [WEATHER_TOOL]}),
    ("tool_call_round_trip", [
        msg("user", "Weather in Paris?"),
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call12345", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "content": "{\"temp\": 21, \"sky\": \"clear\"}", "tool_call_id": "call12345"},
    ], {"tools": [WEATHER_TOOL]}),
    ("multimodal_content_list", [{"role": "user", "content": [{"type": "text", "text": "What is this? "},
                                                              {"type": "image"},
                                                              {"type": "text", "text": " Describe."}]}], {}),
]


def is_simple(messages, extra):
    """Cases the C++ test can send through ChatTemplate::apply (role/content strings only,
    scalar extras); the others go through render() with the full context."""
    simple_messages = all(set(m) == {"role", "content"} and isinstance(m["content"], str) for m in messages)
    simple_extra = all(isinstance(v, (str, int, float, bool)) or v is None for v in extra.values())
    return simple_messages and simple_extra


def render_case(template, context):
    try:
        return {"output": template.render(**context)}
    except RaisedByTemplate as e:
        return {"error": {"raised": True, "message": str(e)}}
    except Exception as e:  # Jinja's own errors: undefined, type errors, ...
        return {"error": {"raised": False, "type": type(e).__name__, "message": str(e)}}


def transformers_check(name, source, cases):
    """Renders through transformers' own environment when it is installed."""
    try:
        from transformers.utils import chat_template_utils
    except Exception:
        return None

    class FixedClock(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return FIXED_NOW

    # transformers' strftime_now reads the module's `datetime` when called: pin its clock.
    if hasattr(chat_template_utils, "datetime"):
        chat_template_utils.datetime = FixedClock
    elif "strftime_now" in source:
        return 0  # cannot pin this version's clock; nothing comparable
    compiled = chat_template_utils._compile_jinja_template(source)
    mismatches = 0
    for case in cases:
        ctx = case["context"]
        try:
            got = {"output": compiled.render(**ctx)}
        except Exception as e:
            got = {"error": str(e)}
        want = {"output": case["expected"]} if "expected" in case else {"error": case["error"]["message"]}
        if got != want:
            mismatches += 1
            print(f"  transformers differs: {name} {case['name']}", file=sys.stderr)
    return mismatches


def build(name, source, env):
    template = env.from_string(source)
    bos, eos = TOKENS.get(name, ("<s>", "</s>"))
    cases = []
    for conv_name, messages, extra in CONVERSATIONS:
        for agp in (True, False):
            # What transformers passes: messages, tools, documents, add_generation_prompt and
            # the special tokens; extra variables (here: tools, date_string) override them.
            context = {"messages": messages, "tools": None, "documents": None,
                       "add_generation_prompt": agp, "bos_token": bos, "eos_token": eos, **extra}
            result = render_case(template, context)
            case = {"name": f"{conv_name}/{'gen' if agp else 'nogen'}",
                    "via_apply": is_simple(messages, extra),
                    "messages": messages, "add_generation_prompt": agp,
                    "bos_token": bos, "eos_token": eos, "extra": extra, "context": context}
            if "output" in result:
                case["expected"] = result["output"]
            else:
                case["error"] = result["error"]
            cases.append(case)
    return {
        "template": f"{name}.jinja",
        "generator": "scripts/golden_chat_templates.py",
        "jinja2_version": jinja2.__version__,
        "strftime_now": FIXED_NOW.isoformat(),
        "cases": cases,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the stored goldens, write nothing")
    args = parser.parse_args()
    env = make_environment()
    GOLDEN.mkdir(parents=True, exist_ok=True)
    stale = 0
    for path in sorted(FIXTURES.glob("*.jinja")):
        name = path.stem
        source = path.read_text(encoding="utf-8")
        golden = build(name, source, env)
        text = json.dumps(golden, ensure_ascii=False, indent=1) + "\n"
        out = GOLDEN / f"{name}.json"
        n_ok = sum("expected" in c for c in golden["cases"])
        n_err = len(golden["cases"]) - n_ok
        tf = transformers_check(name, source, golden["cases"])
        note = "" if tf is None else f", transformers mismatches: {tf}"
        print(f"{name}: {n_ok} outputs, {n_err} exceptions{note}")
        if tf:
            stale += 1
        if args.check:
            if not out.exists() or out.read_text(encoding="utf-8") != text:
                print(f"  {out.relative_to(ROOT)} is out of date", file=sys.stderr)
                stale += 1
        else:
            out.write_text(text, encoding="utf-8")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
