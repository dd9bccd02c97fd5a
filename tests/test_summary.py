"""Module summaries: a big module parsed in chunks says exactly what the whole parse says."""
from __future__ import annotations

import ast
import os
import sys

import pytest

from lints import names, summary, summary_records
from lints.options import Config

from .helpers import lint_run

ENGINE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "engine",
                      "model_runner.py")


def _whole(text: str) -> dict:
    return summary._summarize(summary.parse_quietly(text, "m.py").body, text, "m.py", "m", False)


def _parsed_in_chunks(monkeypatch, text: str) -> tuple[dict, int, int]:
    """The summary, the number of chunks parsed and the number of misfits (whole-file fallbacks)."""
    chunks, misfits = [0], [0]
    real_parse, real_summarize = summary.parse_quietly, summary._summarize

    def counting_parse(source: str, path: str) -> ast.Module:
        chunks[0] += 1
        return real_parse(source, path)

    def counting_summarize(statements, *args):
        try:
            return real_summarize(statements, *args)
        except summary._ChunkMisfit:
            misfits[0] += 1
            raise

    monkeypatch.setattr(summary, "CHUNK_CHARS", 64)
    monkeypatch.setattr(summary, "parse_quietly", counting_parse)
    monkeypatch.setattr(summary, "_summarize", counting_summarize)
    return summary.summarize(text, "m.py", "m"), chunks[0], misfits[0]


def test_engine_in_chunks_equals_the_whole_parse(monkeypatch):
    with open(ENGINE, encoding="utf-8") as handle:
        text = handle.read()
    got, chunks, misfits = _parsed_in_chunks(monkeypatch, text)
    assert chunks > 3 and misfits == 0
    assert got == _whole(text)


SPLIT_TRAPS = {
    "def inside a string": 'DOC = """\n' + "x = 1\n" * 20 + 'def not_a_function():\n    pass\n"""\n'
                           "def real():\n    return DOC\n",
    "decorator inside brackets": "x = (a\n" + "     + b\n" * 20 + "@ c)\n" "def g():\n    pass\n",
    "after a backslash": "x = a \\\n" + "  " * 80 + "\\\n" "@ c\n" "def g():\n    pass\n",
    "decorator before its def": "import torch\n" + "y = 1\n" * 20 + "@torch.inference_mode()\n"
                                + "# " + "c" * 80 + "\n" "def warmup():\n    pass\n",
}


@pytest.mark.parametrize("name", sorted(SPLIT_TRAPS))
def test_a_split_that_is_no_statement_start_falls_back_to_the_whole_parse(monkeypatch, name):
    text = SPLIT_TRAPS[name]
    got, _chunks, misfits = _parsed_in_chunks(monkeypatch, text)
    assert got == _whole(text)
    assert misfits == 1  # the chunk before the split does not parse alone


def test_module_level_enter_context_spans_every_chunk(monkeypatch):
    text = ("import contextlib, torch\nstack = contextlib.ExitStack()\n"
            "stack.enter_context(torch.inference_mode())\n"
            + "".join(f"def f{i}():\n    return {i}\n" for i in range(40)))
    got, chunks, misfits = _parsed_in_chunks(monkeypatch, text)
    assert chunks > 3 and misfits == 0
    assert got == _whole(text)
    withs = got["functions"][summary_records.MODULE_SCOPE]["withs"]
    assert withs[0].end_line == text.count("\n")  # open to the end of the module, not of a chunk


def test_syntax_error_is_reported_at_its_line_of_the_whole_file(monkeypatch):
    text = "".join(f"def f{i}():\n    return {i}\n" for i in range(40)) + "def broken(:\n    pass\n"
    monkeypatch.setattr(summary, "CHUNK_CHARS", 64)
    with pytest.raises(SyntaxError) as caught:
        summary.summarize(text, "m.py", "m")
    assert caught.value.lineno == 81


def test_findings_in_a_chunked_module_keep_their_lines(tmp_path, monkeypatch):
    with open(ENGINE, encoding="utf-8") as handle:
        text = handle.read()
    files = {"pyproject.toml": "[tool.gradmode]\n", "engine.py": text}
    whole = lint_run(tmp_path, files, Config(), paths=["engine.py"]).findings
    monkeypatch.setattr(summary, "CHUNK_CHARS", 64)
    chunked = lint_run(tmp_path, files, Config(), paths=["engine.py"]).findings
    assert whole and chunked == whole


def test_every_module_of_this_repository_in_chunks_equals_the_whole_parse(monkeypatch):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    monkeypatch.setattr(summary, "CHUNK_CHARS", 256)
    compared = 0
    for folder in ("lints", "codemods", "tests", "gpu_validation", "bench", "examples"):
        for current, _dirs, files in os.walk(os.path.join(root, folder)):
            for name in sorted(n for n in files if n.endswith(".py")):
                with open(os.path.join(current, name), encoding="utf-8") as handle:
                    text = handle.read()
                try:
                    whole = _whole(text)
                except SyntaxError:
                    continue  # fixtures that are broken on purpose
                assert summary.summarize(text, "m.py", "m") == whole, name
                compared += 1
    assert compared > 100


def test_a_chunk_too_deep_to_parse_falls_back_to_the_whole_parse(monkeypatch):
    text = "".join(f"def f{i}():\n    return {i}\n" for i in range(40))
    real_parse = summary.parse_quietly
    calls = []

    def shallow_parse(source: str, path: str) -> ast.Module:
        calls.append(len(source))
        if len(calls) == 1:  # the first chunk: a few frames deeper than the whole parse
            raise RecursionError("maximum recursion depth exceeded")
        return real_parse(source, path)

    monkeypatch.setattr(summary, "CHUNK_CHARS", 64)
    monkeypatch.setattr(summary, "parse_quietly", shallow_parse)
    assert summary.summarize(text, "m.py", "m") == _whole(text)
    assert calls[-1] == len(text)  # then the whole file


def _notable_by_scan(fn: dict) -> list[int]:
    """What ``notable`` must hold, from every call of the function."""
    out = []
    for index, call in enumerate(fn["calls"]):
        func = call.func
        leaf = func[1].rsplit(".", 1)[-1] if func[0] == "n" else func[2] if func[0] == "a" else None
        if leaf in names.NOTABLE_CALL_LEAVES:
            out.append(index)
    return out


def test_notable_calls_are_the_calls_named_with_a_notable_word():
    text = ("import torch\n"
            "def f(x, g):\n"
            "    a = torch.empty(3)\n"                  # factory: notable
            "    b = x.new_zeros(2)\n"                  # tensor-method factory: notable
            "    c = make().new_empty(1)\n"             # `f().new_empty`: notable (make() is not)
            "    with torch.cuda.graph(g):\n"           # capture: notable
            "        pass\n"
            "    g.replay()\n"                          # replay: notable
            "    empty_cache()\n"                       # `empty_cache` is no `empty`: not notable
            "    print(torch.zeros_like(a))\n")         # inner call notable, print() not
    fn = summary.summarize(text, "m.py", "m")["functions"]["f"]
    leaves = [fn["calls"][i].func for i in fn["notable"]]
    assert leaves == [["n", "torch.empty"], ["n", "x.new_zeros"], ["a", ["c", 2], "new_empty"],
                      ["n", "torch.cuda.graph"], ["n", "g.replay"], ["n", "torch.zeros_like"]]
    assert fn["notable"] == _notable_by_scan(fn)


def _results(tmp_path, files: dict, config: Config) -> tuple:
    run = lint_run(tmp_path, files, config)
    phases = run.analysis.phases
    return (sorted(run.findings), sorted(phases.roots.items()), sorted(phases.serving_roots.items()),
            sorted(run.analysis.buffers.allocations))


def test_the_notable_prefilter_changes_no_result(tmp_path, monkeypatch):
    """Every rule example and the example engine: findings, roots and allocations are the same when
    every call is notable (what the analysis scanned before summaries listed notable calls)."""
    from lints.rules import ALL_RULES

    from .helpers import as_files

    cases = [(as_files(example), Config(extend_select=("GM2",), **rule.EXAMPLE_OPTIONS))
             for rule in ALL_RULES.values() for example in (*rule.VALID, *rule.INVALID)]
    engine = os.path.dirname(ENGINE)
    cases.append(({name: open(os.path.join(engine, name), encoding="utf-8").read() for name in os.listdir(engine)
                   if name.endswith(".py")}, Config(extend_select=("GM2",))))
    # an update only through `out=` (no in-place name), and a buffer kept by `register_buffer`
    cases.append(({"engine/ops.py": "import torch\n"
                                    "class Ops(torch.nn.Module):\n"
                                    "    def __init__(self):\n"
                                    "        super().__init__()\n"
                                    "        self._buf = None\n"
                                    "        self.register_buffer('cos', torch.zeros(4))\n"
                                    "    def step(self, a, b):\n"
                                    "        if self._buf is None:\n"
                                    "            self._buf = torch.empty(4)\n"
                                    "        torch.mul(a, b, out=self._buf)\n"
                                    "        torch.sub(a, b, out=self.cos)\n"}, Config(extend_select=("GM2",))))
    found = 0
    for n, (files, config) in enumerate(cases):
        prefiltered = _results(tmp_path / f"notable{n}", files, config)
        with monkeypatch.context() as patch:
            patch.setattr(summary, "is_notable_call", lambda leaf, kwargs: True)
            scanned = _results(tmp_path / f"every{n}", files, config)
        assert prefiltered == scanned, files
        found += len(prefiltered[0]) + len(prefiltered[1]) + len(prefiltered[3])
    assert len(cases) > 40 and found > 40


def test_record_fields_are_the_fields_a_dataclass_declares():
    text = ("import dataclasses, typing\n"
            "from dataclasses import dataclass\n"
            "@dataclass(frozen=True)\n"
            "class Plan:\n"
            "    table: 'torch.Tensor | None' = None\n"
            "    shared: typing.ClassVar[int] = 0\n"
            "    count: int = 0\n"
            "    def fill(self): pass\n"
            "@dataclasses.dataclass\n"
            "class Scratch:\n"
            "    buf: object = None\n"
            "class Plain:\n"
            "    buf: object = None\n"
            # decorators that are no names: nothing to read, nothing lost
            "@registry[0]\n"
            "@(lambda cls: cls)\n"
            "@make()()\n"
            "class Odd:\n"
            "    x: int = 0\n")
    classes = _whole(text)["classes"]
    assert classes["Plan"]["record_fields"] == ["table", "count"]  # a ClassVar is the class's, not a field
    assert classes["Scratch"]["record_fields"] == ["buf"]
    assert "record_fields" not in classes["Plain"] and "record_fields" not in classes["Odd"]


def test_decoded_summaries_share_names_and_empties_and_keep_every_value():
    """``with_records`` makes a summary decoded from JSON equal to the one summarised (records and all), and two
    decoded summaries hold one object for a name both spell and for every empty list of a function."""
    import json

    from lints.summary_cache import encode_json

    first = ("import torch\nclass Runner:\n    def warmup(self, n):\n        self.buf = torch.empty(n)\n"
             "        self.buf.fill_(0)\n        return self.buf\n")
    second = "import torch\ndef build(n):\n    out = torch.empty(n)\n    out.zero_()\n    return out\n"
    made = [summary.summarize(text, f"pkg/m{n}.py", f"pkg.m{n}") for n, text in enumerate((first, second))]
    decoded = [summary_records.with_records(json.loads(encode_json(one))) for one in made]
    assert decoded == made  # NamedTuples equal the tuples they are; the shared objects equal what they stand for
    warmup = decoded[0]["functions"]["Runner.warmup"]
    build = decoded[1]["functions"]["build"]
    assert warmup["calls"][0].func == ["n", "torch.empty"]
    assert warmup["calls"][0].func is build["calls"][0].func
    assert warmup["globals"] == [] and warmup["globals"] is build["globals"]
    assert warmup["calls"][1].kwargs == {} and warmup["calls"][1].kwargs is build["calls"][1].kwargs
    assert warmup["assigns"][0].target == ["n", "self.buf"]
    # a constant equal to a name's text is not that name: only ["n", ...] is shared by its text
    constant = summary_records.with_records(json.loads(encode_json(summary.summarize(
        "import torch\nclass A:\n    def f(self):\n        self.mode = 'torch.empty'\n", "pkg/c.py", "pkg.c"))))
    value = constant["functions"]["A.f"]["assigns"][0].value
    assert value == ["k", "torch.empty"]  # not the shared ["n", "torch.empty"]


def test_decoded_summaries_share_leaves_strings_and_lines_and_keep_every_value():
    """Two decoded summaries hold one object for each leaf of a call, an argument, an assignment or a return they
    both spell, for a call's one argument when that is a leaf, for the strings of parameters, annotations and
    imports, and for line numbers; a constant is shared only with one of its own type (``1 == True`` in Python,
    not in JSON), and a value equal to a name's text is not that name."""
    import json

    from lints.summary_cache import encode_json

    pad = "\n" * 300  # lines past 256, which CPython does not share by itself
    texts = [pad + "import torch\nfrom os import path\ndef build(n: int, flag=True):\n    out = torch.empty(n)\n"
             "    out.fill_(1)\n    f(n, None, 'x', fn())\n    g(n)\n    return out\n",
             pad + "import torch\nfrom os import path\ndef build(n: int, flag=True):\n    out = torch.empty(n)\n"
             "    out.fill_(True)\n    f(n, None, 'x', fn())\n    g(n)\n    return out\n"]
    made = [summary.summarize(text, f"pkg/m{i}.py", f"pkg.m{i}") for i, text in enumerate(texts)]
    one, two = (summary_records.with_records(json.loads(encode_json(m)))["functions"]["build"] for m in made)
    assert [one, two] == [m["functions"]["build"] for m in made]
    calls_one, calls_two = one["calls"], two["calls"]
    assert [c.func for c in calls_one] == [["n", "torch.empty"], ["n", "out.fill_"], ["n", "fn"], ["n", "f"],
                                           ["n", "g"]]
    assert calls_one[1].args == [["k", 1]] and calls_two[1].args == [["k", True]]
    assert calls_one[1].args[0] is not calls_two[1].args[0]  # 1 and True: equal in Python, not in JSON
    assert type(calls_one[1].args[0][1]) is int and type(calls_two[1].args[0][1]) is bool
    assert calls_one[0].args is calls_two[0].args is calls_one[4].args  # [["n", "n"]], one list
    for left, right in zip(calls_one[3].args, calls_two[3].args):  # n, None, 'x', the result of call 2
        assert left is right
    assert calls_one[0].line == 304 and calls_one[0].line is calls_two[0].line
    assert one["assigns"][0].target == ["n", "out"] and one["assigns"][0].target is two["assigns"][0].target
    assert one["rets"][0].value is two["rets"][0].value is one["assigns"][0].target
    assert one["params"] == ["n", "flag"] and one["params"][1] is two["params"][1]  # not "n": CPython shares those
    assert one["defaults"]["flag"] is two["defaults"]["flag"]
    tops = [summary_records.with_records(json.loads(encode_json(m)))["functions"]["<module>"] for m in made]
    assert tops[0]["imports"]["path"] == "os.path" and tops[0]["imports"]["path"] is tops[1]["imports"]["path"]
    assert one["ann"]["n"] is two["ann"]["n"]
    assert one["name"] is two["name"]


def test_decoded_summaries_share_inner_leaves_name_lists_arguments_keywords_and_field_names():
    """Two decoded summaries hold one object for a leaf inside a composite expression (``self.buf[k]``'s
    ``self.buf``), for equal lists of names (parameters, a test's names), for a call's equal arguments and keywords;
    each function is a plain dict with its keys in their order, whose table of keys is shared (smaller than the dict
    JSON gives); emptying the tables keeps every value."""
    import json
    import platform

    from lints.summary_cache import encode_json

    text = ("import torch\nclass Pool:\n    def step(self, k, n):\n        if k is None:\n            k = 0\n"
            "        if self.buf is None:\n"
            "            self.buf = torch.empty(n, device='cuda')\n"
            "        g(self.buf[k], n)\n        h(n, None, non_blocking=True)\n"
            "        out = torch.empty(n, device='cuda')\n        return out\n")
    made = [summary.summarize(text, f"pkg/m{i}.py", f"pkg.m{i}") for i in range(2)]
    plain = [json.loads(encode_json(m)) for m in made]
    decoded = [summary_records.with_records(json.loads(encode_json(m))) for m in made]
    assert [encode_json(d) for d in decoded] == [encode_json(m) for m in made]  # (a fresh clause holds tuples)
    one, two = (d["functions"]["Pool.step"] for d in decoded)
    calls = {call.func[1]: call for call in one["calls"]}
    others = {call.func[1]: call for call in two["calls"]}
    inner = calls["g"].args[0]
    assert inner == ["s", ["n", "self.buf"]] and inner is not others["g"].args[0]  # the composite is each row's own
    assert inner[1] is others["g"].args[0][1]
    assert one["guards"][1].names == ["self", "self.buf"] and one["guards"][1].names is two["guards"][1].names
    assert one["guards"][0].none_clauses == [[["k", True]]]
    assert one["guards"][0].none_clauses is two["guards"][0].none_clauses
    assert one["params"] == ["self", "k", "n"] and one["params"] is two["params"]
    assert calls["h"].args == [["n", "n"], ["k", None]] and calls["h"].args is others["h"].args
    assert calls["h"].kwargs == {"non_blocking": ["k", True]} and calls["h"].kwargs is others["h"].kwargs
    empties = [call for call in one["calls"] if call.func[1] == "torch.empty"]
    assert len(empties) == 2 and empties[0].kwargs is empties[1].kwargs and empties[0].args is empties[1].args
    assert type(one) is dict and list(one) == list(made[0]["functions"]["Pool.step"])
    if platform.python_implementation() == "CPython":  # the instance dicts' shared keys are CPython's
        assert sys.getsizeof(one) < sys.getsizeof(plain[0]["functions"]["Pool.step"]) / 2
    summary_records.forget_shared_objects()
    assert all(not table for table in summary_records._SHARED_TABLES)
    assert [encode_json(d) for d in decoded] == [encode_json(m) for m in made]  # what was handed out stays
    third = summary_records.with_records(json.loads(encode_json(made[0])))["functions"]["Pool.step"]
    assert third == one and third["params"] is not one["params"]  # a new table: equal, not the same object


def test_functions_keep_the_field_orders_whose_keys_are_shared_and_an_odd_row_costs_no_other():
    """Every function the summarizer makes has its fields in one of the orders whose keys decoded dicts share; a row
    missing a field decodes as JSON gave it (equal, its own table of keys), and the rows decoded after it still
    share theirs (CPython 3.9 and 3.10 would stop sharing for the whole process had it been given the class)."""
    import json
    import platform

    from lints.summary_cache import encode_json

    made = summary.summarize("def plain(x):\n    return x\ndef typed(x) -> Runner:\n    return x\n"
                             "class Runner:\n    def step(self):\n        pass\n", "pkg/o.py", "pkg.o")
    orders = {tuple(fn) for fn in made["functions"].values()}
    assert orders == set(summary_records._SHARED_KEY_ORDERS)  # with and without "ret"
    odd = json.loads(encode_json(made))
    del odd["functions"]["plain"]["notable"]
    decoded_odd = summary_records.with_records(odd)["functions"]["plain"]
    assert "notable" not in decoded_odd and decoded_odd["calls"] == []
    later = summary_records.with_records(json.loads(encode_json(made)))["functions"]["plain"]
    plain_json = json.loads(encode_json(made))["functions"]["plain"]
    assert encode_json(later) == encode_json(plain_json) and list(later) == list(plain_json)
    if platform.python_implementation() == "CPython":
        assert sys.getsizeof(decoded_odd) > sys.getsizeof(later) * 2


def test_a_planted_field_or_a_deep_expression_decodes_as_it_is():
    """A function with a field no summary has (``__dict__``, planted) stays the dict JSON gave, its field never
    handed to ``setattr``; an expression nested deeper than the leaves are shared decodes whole, without recursing
    as deep as it goes."""
    import json

    from lints.summary_cache import encode_json

    valid = summary.summarize("def build(n):\n    return g(n)\n", "pkg/v.py", "pkg.v")
    planted = json.loads(encode_json(valid))
    planted["functions"]["build"]["__dict__"] = {"calls": "not a list"}
    decoded = summary_records.with_records(planted)
    fn = decoded["functions"]["build"]
    assert fn["__dict__"] == {"calls": "not a list"} and fn["calls"][0].func == ["n", "g"]
    summary_records.forget_shared_objects()  # a clause whose flag is 1, decoded first, reaches no valid row's True
    guarded = summary.summarize("def build(n):\n    if n is None:\n        n = 1\n", "pkg/g.py", "pkg.g")
    garbled = json.loads(encode_json(guarded))
    garbled["functions"]["build"]["guards"][0][5] = [[["n", 1]]]
    summary_records.with_records(garbled)
    clause = summary_records.with_records(json.loads(encode_json(guarded)))["functions"]["build"]["guards"][0]
    assert clause.none_clauses == [[["n", True]]] and clause.none_clauses[0][0][1] is True
    limit = sys.getrecursionlimit()
    levels = limit + 500  # deeper than this run's frames may go: decoded (in a test) under a higher limit
    nested = json.loads(encode_json(valid))
    sys.setrecursionlimit(limit + 1000)
    try:
        nested["functions"]["build"]["calls"][0][1] = [json.loads('["s", ' * levels + '["n", "x"]' + "]" * levels)]
    finally:
        sys.setrecursionlimit(limit)
    arg = summary_records.with_records(nested)["functions"]["build"]["calls"][0].args[0]
    for _ in range(levels):
        assert arg[0] == "s"
        arg = arg[1]
    assert arg == ["n", "x"]


def test_a_garbled_row_shares_nothing_with_the_summaries_decoded_after_it(monkeypatch):
    """A name spelt otherwise than ``["n", text]`` (a planted row: ``["n", "torch.empty", 0]``, ``"nf"``) is kept as
    it is, never handed to the summaries decoded after it, whose ``["n", "torch.empty"]`` stays what they say."""
    import json

    from lints.summary_cache import encode_json

    summary_records.forget_shared_objects()  # the garbled row decoded first of the run
    valid = summary.summarize("import torch\ndef f():\n    pass\ndef build(n):\n    f()\n    return torch.empty(n)\n",
                              "pkg/v.py", "pkg.v")
    garbled = json.loads(encode_json(valid))
    calls = garbled["functions"]["build"]["calls"]
    assert [call[0] for call in calls] == [["n", "f"], ["n", "torch.empty"]]
    calls[0][0] = "nf"
    calls[1][0] = ["n", "torch.empty", 0]
    summary_records.with_records(garbled)
    decoded = summary_records.with_records(json.loads(encode_json(valid)))
    assert [call.func for call in decoded["functions"]["build"]["calls"]] == [["n", "f"], ["n", "torch.empty"]]
    assert decoded == valid
