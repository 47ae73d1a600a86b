/* The Jinja interpreter (runtime/chat/jinja.h): the language features chat templates use, with the
 * results Python's Jinja2 gives under Hugging Face's settings (trim_blocks, lstrip_blocks), its errors
 * (a line number for syntax errors, raise_exception's message), and its bounds: a hostile or truncated
 * template ends in an error, never a crash or a hang. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"

static const char CTX[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": \"Hi\"},"
    " {\"role\": \"assistant\", \"content\": \" Yo \"}], \"add_generation_prompt\": true,"
    " \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"n\": 3, \"f\": 2.5, \"d\": {\"b\": 2, \"a\": 1},"
    " \"l\": [3, 1, 2], \"s\": \"Hello World\", \"u\": \"h\\u00e9llo\", \"parts\": [{\"type\": \"text\", "
    "\"text\": \"A\"},"
    " {\"type\": \"image\"}, {\"type\": \"text\", \"text\": \"B\"}]}";

/* Renders src with ctx; NULL on error (the message in err). */
static char *try_render(const char *src, const char *ctx, char *err, size_t cap)
{
    jinja_template *t = jinja_parse(src, strlen(src), err, cap);
    if (!t)
        return NULL;
    char *out = jinja_render(t, ctx, NULL, err, cap);
    jinja_free(t);
    return out;
}

static void expect(const char *src, const char *want)
{
    char err[512] = "";
    char *out = try_render(src, CTX, err, sizeof err);
    cr_expect(out != NULL, "[%s] failed: %s", src, err);
    if (out)
        cr_expect_str_eq(out, want, "[%s] rendered [%s], expected [%s]", src, out, want);
    free(out);
}

static void expect_error(const char *src, const char *want_in_message)
{
    char err[512] = "";
    char *out = try_render(src, CTX, err, sizeof err);
    cr_expect(out == NULL, "[%s] rendered [%s], expected an error", src, out ? out : "");
    cr_expect(strstr(err, want_in_message) != NULL, "[%s]: error [%s], expected it to hold [%s]", src, err,
              want_in_message);
    free(out);
}

Test(jinja, output_and_literals)
{
    expect("a{{ 'b' }}c{{ \"d\" }}", "abcd");
    expect("{{ 'it\\'s' }} {{ \"q\\\"\\n\" }}", "it's q\"\n");
    expect("{{ 1 }} {{ -2 }} {{ 2.5 }} {{ 1e3 }} {{ 10 / 4 }} {{ 10 // 4 }} {{ -7 % 3 }} {{ 2 ** 10 }}",
           "1 -2 2.5 1000.0 2.5 2 2 1024");
    expect("{{ none }} {{ None }} {{ true }} {{ False }} {{ undefined_thing }}|", "None None True False |");
    expect("{{ [1, 'a', none] }} {{ {'k': 'v'} }} {{ (1, 2) }} {{ (1,) }}",
           "[1, 'a', None] {'k': 'v'} (1, 2) (1,)");
    expect("{{ 'a' 'b' }} {{ 'x' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ [1] + [2] }}", "ab x1None ababab [1, 2]");
    expect("{# a comment #}x{# another\nline #}", "x");
}

Test(jinja, whitespace_control)
{
    /* '-' strips all whitespace on its side */
    expect("a  {{- 'b' -}}  \n c", "abc");
    /* trim_blocks: the newline after a block tag goes; lstrip_blocks: the indentation before it */
    expect("{% if true %}\n  x\n{% endif %}\ny", "  x\ny");
    expect("  {% if true %}\n    x\n  {% endif %}\n", "    x\n");
    /* a variable tag keeps its newline; text before a tag on the same line is not stripped */
    expect("{{ 'a' }}\nb {% if true %}c{% endif %}", "a\nb c");
    /* '+' keeps the indentation; one trailing newline of the template is dropped */
    expect("  {%+ if true %}x{% endif %}\n", "  x");
    expect("{# c #}\nx", "x");
    expect("a\r\nb", "a\nb");
}

Test(jinja, conditions)
{
    expect("{% if n > 2 %}big{% elif n > 1 %}mid{% else %}small{% endif %}", "big");
    expect("{% if n > 5 %}big{% elif n > 1 %}mid{% else %}small{% endif %}", "mid");
    expect("{% if nothing %}a{% else %}b{% endif %}", "b");
    expect("{{ 'y' if n == 3 else 'n' }} {{ 'y' if n == 4 }}|", "y |");
    expect("{{ 1 < n < 5 }} {{ n < 2 or n > 2 }} {{ not n }} {{ n and 'x' }} {{ 0 or 'z' }}",
           "True True False x z");
    expect("{{ 'a' in 'cat' }} {{ 2 in l }} {{ 'a' in d }} {{ 'q' not in d }} {{ 5 in l }}",
           "True True True True False");
    expect("{{ messages[0].role == 'system' }} {{ messages[0]['content'] != 'S' }}", "True False");
}

Test(jinja, loops)
{
    expect("{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ x }}{% if not loop.last %},{% endif %}{% "
           "endfor %}",
           "103,211,322");
    expect("{% for x in l %}{{ loop.first }}{{ loop.length }}{{ loop.revindex }} {% endfor %}",
           "True33 False32 False31 ");
    expect("{% for x in l if x > 1 %}{{ x }}{{ loop.length }}{% endfor %}", "3222");
    expect("{% for x in [] %}a{% else %}empty{% endfor %}", "empty");
    expect("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "b=2;a=1;");
    expect("{% for k in d %}{{ k }}{% endfor %}", "ba");
    expect("{% for c in 'héllo' %}{{ c }}.{% endfor %}", "h.é.l.l.o.");
    expect(
        "{% for x in range(5) %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 3 %}{% break %}{% endif %}"
        "{{ x }}{% endfor %}",
        "02");
    expect("{% for x in l %}{{ loop.previtem }}-{{ loop.nextitem }} {% endfor %}", "-1 3-2 1- ");
    expect("{% for m in messages %}{% for c in m.content %}{% endfor %}{{ loop.index }}{% endfor %}", "123");
    expect("{{ range(2, 8, 3) }} {{ range(3, 0, -1) }}", "[2, 5] [3, 2, 1]");
}

Test(jinja, set_and_scoping)
{
    expect("{% set x = 1 %}{% for i in l %}{% set x = i %}{% endfor %}{{ x }}", "1");
    expect("{% set ns = namespace(x=1, y='a') %}{% for i in l %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x "
           "}}{{ ns.y }}",
           "7a");
    expect("{% set a, b = 1, 2 %}{{ a }}{{ b }}", "12");
    expect("{% set block %}x{{ n }}y{% endset %}[{{ block }}]", "[x3y]");
    expect("{% if true %}{% set z = 5 %}{% endif %}{{ z }}", "5");
    /* Hugging Face's immutable sandbox: methods that change a list or a dict are refused, readers are not */
    expect_error(
        "{% set items = [] %}{% for i in l %}{% set _ = items.append(i * 2) %}{% endfor %}{{ items }}",
        "'append' of 'list' object is unsafe");
    expect_error("{% set d = {} %}{% set _ = d.update({'a': 1}) %}", "'update' of 'dict' object is unsafe");
    expect_error("{{ l.pop() }}", "'pop' of 'list' object is unsafe");
    expect("{{ {'a': 1}.get('a') }} {{ l.index(1) }} {{ {'a': 1}.items() | length }}", "1 1 1");
}

Test(jinja, undefined_as_jinja2)
{
    /* a missing key is undefined; an attribute, item or slice of undefined is an error, as is its JSON */
    expect("[{{ messages[0].nothing }}]{{ messages[0].nothing is defined }}", "[]False");
    expect_error("{{ messages[0].nothing.deeper }}", "no attribute or item 'deeper'");
    expect_error("{{ zz['k'] }}", "'zz' is undefined");
    expect_error("{{ messages[0].nothing.deeper }}",
                 "'nothing' is undefined: it has no attribute or item 'deeper'");
    expect_error("{{ zz[1:] }}", "cannot slice an undefined value");
    expect_error("{{ zz | tojson }}", "not JSON serializable");
    expect("{{ none.attr is defined }}", "False");
}

Test(jinja, generators_as_jinja2)
{
    /* map, select, ... give generators: true even when empty, iterated once, no length, JSON or text */
    expect("{{ 'T' if l | select('gt', 9) else 'F' }}", "T");
    expect("{% set g = l | map('string') %}{{ g | join }}|{{ g | join }}", "312|");
    expect("{{ (l | reverse)[0] }}|{{ l | reverse | list }}|{{ {'a': 1} | items | list }}",
           "|[2, 1, 3]|[('a', 1)]");
    expect_error("{{ l | select | length }}", "has no length");
    expect_error("{{ l | map('string') | tojson }}", "not JSON serializable");
    expect_error("{{ l | unique }}", "cannot print a generator");
    expect_error("{{ l | reject('odd') | last }}", "cannot be reversed");
    expect_error("{{ (l | select) + [1] }}", "unsupported operand");
    expect("{{ l | select is sequence }} {{ l | select is iterable }} {{ (l | select) == l }}",
           "False True False");
}

Test(jinja, markup_as_jinja2)
{
    /* a |safe string (Markup) HTML-escapes a plain string added to it, on either side; ~ gives plain text */
    expect("{{ '<a>' | safe + '<b>' }}|{{ '<a>' + '<b>' | safe }}|{{ '<a>' | safe ~ '<b>' }}",
           "<a>&lt;b&gt;|&lt;a&gt;<b>|<a><b>");
    expect("{{ ('&' | safe) * 2 + '\"\\'' }}|{{ '<x>' | e }}|{{ '<x>' | e | escape }}|{{ '<x>' | safe | "
           "forceescape }}",
           "&&&#34;&#39;|&lt;x&gt;|&lt;x&gt;|&lt;x&gt;");
}

Test(jinja, macros_and_call)
{
    expect("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ "
           "greet('B', '?') }} "
           "{{ greet(punct='.', name='C') }}",
           "Hi A! Hi B? Hi C.");
    expect("{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}in{{ n }}{% endcall %}",
           "<in3>");
    expect("{% set g = 'outer' %}{% macro m() %}{{ g }}{% endmacro %}{{ m() }}", "outer");
    expect("{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k * fact(k - 1) | int }}{% endif %}{% endmacro %}"
           "{{ fact(5) }}",
           "120");
}

Test(jinja, tests)
{
    expect(
        "{{ n is defined }} {{ zz is defined }} {{ zz is undefined }} {{ none is none }} {{ n is not none }}",
        "True False True True True");
    expect("{{ s is string }} {{ d is mapping }} {{ l is iterable }} {{ l is sequence }} {{ n is number }}",
           "True True True True True");
    expect("{{ true is boolean }} {{ n is odd }} {{ n is even }} {{ n is equalto 3 }} {{ n is eq(4) }}",
           "True True False True False");
    expect("{{ true is true }} {{ false is false }} {{ 1 is true }} {{ 6 is divisibleby 3 }}",
           "True True False True");
    expect("{{ messages | selectattr('role', 'equalto', 'user') | list | length }}", "1");
    expect_error("{{ n is frobnicated }}", "unknown test 'frobnicated'");
}

Test(jinja, filters)
{
    expect("{{ s | length }} {{ u | length }} {{ l | count }} {{ d | length }}", "11 5 3 2");
    expect("[{{ '  x y \\n' | trim }}] {{ s | upper }} {{ s | lower }} {{ 'hello wORLD' | title }} {{ "
           "'hELLO' | capitalize }}",
           "[x y] HELLO WORLD hello world Hello World Hello");
    expect("{{ n | string }}{{ '42' | int + 1 }} {{ 'x' | int }} {{ '2.5' | float }} {{ 3 | float }}",
           "343 0 2.5 3.0");
    expect("{{ l | join(', ') }} {{ zz | default('dflt') }} {{ '' | d('e', true) }} {{ l | first }} {{ l | "
           "last }}",
           "3, 1, 2 dflt e 3 2");
    expect("{{ s | replace('o', '0') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ '<b>' | safe }}",
           "Hell0 W0rld bba <b>");
    expect("{{ messages | map(attribute='role') | join(',') }} {{ ['a', 'b'] | map('upper') | list }}",
           "system,user,assistant ['A', 'B']");
    expect("{{ l | select('odd') | list }} {{ l | reject('odd') | list }} {{ messages | rejectattr('role', "
           "'equalto', "
           "'user') | map(attribute='content') | join }}",
           "[3, 1] [2] S Yo ");
    expect("{{ [1, 2, 1, 3] | unique | list }} {{ l | reverse | list }} {{ l | sort }} {{ l | "
           "sort(reverse=true) }}",
           "[1, 2, 3] [2, 1, 3] [1, 2, 3] [3, 2, 1]");
    expect("{{ messages | sort(attribute='role') | map(attribute='role') | join(' ') }}",
           "assistant system user");
    expect("{{ d | dictsort }} {{ d | items | list }}", "[('a', 1), ('b', 2)] [('b', 2), ('a', 1)]");
    expect("{{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 3.5 | round }} {{ -3 | abs }} {{ 'a b  c' | "
           "wordcount }}",
           "2.57 2.0 4.0 3 3");
    expect("{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}", "a\n  b\n\n  c|  a\n  b");
    expect("{{ 'abc' | list }} {{ [3, 1] | max }} {{ [3, 1] | min }} {{ [3, 1] | sum }}",
           "['a', 'b', 'c'] 3 1 4");
    expect_error("{{ n | frobnicate }}", "unknown filter 'frobnicate'");
}

Test(jinja, tojson)
{
    expect("{{ d | tojson }} {{ l | tojson }} {{ 'a\"b\\n\u00e9' | tojson }} {{ none | tojson }} {{ f | "
           "tojson }}",
           "{\"b\": 2, \"a\": 1} [3, 1, 2] \"a\\\"b\\n\u00e9\" null 2.5");
    expect("{{ d | tojson(sort_keys=true) }}", "{\"a\": 1, \"b\": 2}");
    expect("{{ {'a': [1, {'b': true}], 'c': {}} | tojson(indent=2) }}",
           "{\n  \"a\": [\n    1,\n    {\n      \"b\": true\n    }\n  ],\n  \"c\": {}\n}");
}

Test(jinja, subscripts_slices_methods)
{
    expect("{{ l[0] }} {{ l[-1] }} {{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ s[0:5] }} {{ s[::-1] }} {{ "
           "u[1:3] }}",
           "3 2 [1, 2] [3, 1] [2, 1, 3] Hello dlroW olleH él");
    expect("{{ messages[1:] | length }} {{ l[5] is defined }} {{ d.a }} {{ d['b'] }} {{ d.zz is defined }}",
           "2 False 1 2 False");
    expect("[{{ '  x  '.strip() }}] [{{ 'xxaxx'.lstrip('x') }}] [{{ '\\n\\na\\n'.rstrip('\\n') }}]",
           "[x] [axx] [\n\na]");
    expect("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }}",
           "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c']");
    expect("{{ s.startswith('Hell') }} {{ s.endswith('x') }} {{ s.upper() }} {{ s.lower() }} {{ "
           "s.replace('l', 'L') }}",
           "True False HELLO WORLD hello world HeLLo WorLd");
    expect("{{ 'ab cd'.title() }} {{ s.find('o') }} {{ s.count('l') }}", "Ab Cd 4 3");
    expect(
        "{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 7) }} {{ d.keys() | list }} {{ d.values() | list }}",
        "1 None 7 ['b', 'a'] [2, 1]");
    expect("{% for p in parts if p.type == 'text' %}{{ p.text }}{% endfor %}", "AB");
    expect("{{ messages[2].content.split('</think>')[-1].strip() }}", "Yo");
}

Test(jinja, globals_and_raise)
{
    expect("{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}", "<s></s>True");
    expect_error("{{ raise_exception('Bad role: ' + messages[0].role) }}",
                 "the template raised an exception: \"Bad role: system\"");
    char err[256];
    char *out = try_render("{{ strftime_now('%Y') | length }}", CTX, err, sizeof err);
    cr_assert(out, "%s", err);
    cr_expect_str_eq(out, "4");
    free(out);
    /* templates that test for a global the environment may lack (tools, documents) see it undefined */
    expect("{% if tools is not defined or tools is none %}no tools{% endif %}", "no tools");
}

Test(jinja, syntax_errors_name_the_line)
{
    expect_error("a\n{% if x %}\nb", "line 2: 'if' is never closed (expected 'endif')");
    expect_error("a\n\n{{ 1 + }}", "line 3: expected an expression");
    expect_error("{% frobnicate %}", "line 1: unsupported or unexpected statement 'frobnicate'");
    expect_error("{% endfor %}", "unexpected 'endfor'");
    expect_error("{{ 'abc }}", "unterminated string literal");
    expect_error("x\n{{ a", "line 2: unclosed tag");
    expect_error("{# never closed", "unclosed comment");
    expect_error("{{ 1 / 0 }}", "division by zero");
    expect_error("{{ {} < [] }}", "cannot compare");
}

Test(jinja, bounds)
{
    /* runaway loops, recursion, output and memory end in errors */
    expect_error("{% for a in range(1000000) %}{{ '' }}{% for b in l %}{% endfor %}{% endfor %}", "steps");
    expect_error("{% macro r(k) %}{{ r(k + 1) }}{% endmacro %}{{ r(0) }}", "macro calls nest deeper");
    expect_error(
        "{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}"
        "{% endfor %}{{ ns.s }}",
        "exceeds");
    expect_error("{{ range(10000000) }}", "range too large");
    expect_error("{{ 'x' * 1000000000 }}", "too large");
    /* deep nesting is refused while parsing */
    char deep[4096] = "{{ ";
    for (int i = 0; i < 1000; i++)
        strcat(deep, "-");
    strcat(deep, "1 }}");
    expect_error(deep, "nests deeper");
    char err[256];
    cr_expect(try_render("{{ x }}", "[1, 2]", err, sizeof err) == NULL);
    cr_expect(try_render("{{ x }}", "{\"x\": ", err, sizeof err) == NULL);
    cr_expect(strstr(err, "not valid JSON") != NULL, "%s", err);
}

/* Every prefix of each family's template, and the template with a byte flipped at many places, parses
 * and renders or fails with a message; never crashes (the ASan build runs this too) or hangs. */
Test(jinja, truncated_and_mangled_templates_fail_cleanly, .timeout = 120)
{
    static const char *const files[] = {"qwen3.jinja", "llama-3.1-instruct.jinja",
                                        "granite-3.3-instruct.jinja",
                                        "mistral-small-3.2-instruct-2506.jinja"};
    static const char flips[] = "{}%#-()[]'\"|.";
    size_t n_ok = 0, n_err = 0;
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        char path[1024];
        snprintf(path, sizeof path, WOOLLY_SOURCE_DIR "/tests/data/chat/%s", files[k]);
        FILE *f = fopen(path, "rb");
        cr_assert(f, "%s", path);
        static char src[65536];
        const size_t n = fread(src, 1, sizeof src - 1, f);
        src[n] = 0; /* the buffer is reused: a shorter file must not see the last one's tail */
        fclose(f);
        char *buf = malloc(n + 1);
        for (size_t len = 0; len <= n; len += 1 + len / 64) {
            memcpy(buf, src, len);
            buf[len] = 0;
            char err[512] = "";
            char *out = try_render(buf, CTX, err, sizeof err);
            if (out) {
                n_ok++;
            } else {
                n_err++;
                cr_assert(err[0], "no message for a failure");
            }
            free(out);
        }
        for (size_t at = 0; at < n; at += 7) {
            memcpy(buf, src, n + 1);
            buf[at] = flips[at % (sizeof flips - 1)];
            char err[512] = "";
            char *out = try_render(buf, CTX, err, sizeof err);
            if (out)
                n_ok++;
            else
                n_err++;
            free(out);
        }
        free(buf);
    }
    cr_expect(n_ok > 0 && n_err > 0, "%zu rendered, %zu failed", n_ok, n_err);
}
