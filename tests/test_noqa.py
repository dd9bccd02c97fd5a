"""`# noqa`: only comments count, codes compared as flake8 compares them, a statement's lines as one
unit (flake8's), and `--add-noqa` putting the comment where a rerun and flake8 find it."""
from __future__ import annotations

import pytest

from lints.model import Finding
from lints.noqa import add_noqa, is_suppressed, without_suppressed

WITH = "    with torch.inference_mode():"


def kept(source: str, *lines: int, code: str = "GM101") -> list[int]:
    """The lines of ``lines`` (each with a finding ``code``) that no `# noqa` in ``source`` suppresses."""
    findings = [Finding("a.py", line, 4, code, "message") for line in lines]
    return [f.line for f in without_suppressed(findings, lambda path: source)]


def flake8_lines(proc) -> list[str]:
    return [line.split(":")[1] for line in proc.stdout.splitlines() if " GM" in line]


def cli_lines(proc) -> list[str]:
    return [line.split(":")[1] for line in proc.stdout.splitlines() if line and not line.startswith(" ")]


# --- only comments count (bug 1) ----------------------------------------------------------------

@pytest.mark.parametrize("line", [
    WITH[:-1] + ': m("# noqa")\n',
    WITH[:-1] + ": m('# noqa: GM101')\n",
    WITH[:-1] + ': m("""# noqa""")\n',
    WITH[:-1] + ': m("a\\"# noqa")\n',
    WITH[:-1] + ': m(f"{x}# noqa", r"\\\\")\n',
    WITH[:-1] + ': m("never closed # noqa\n',
])
def test_noqa_text_inside_a_string_suppresses_nothing(line):
    assert not is_suppressed(line, "GM101")
    assert kept("import torch\ndef warmup(m):\n" + line + "\n", 3) == [3]


def test_noqa_comment_after_a_string_holding_noqa_text_counts():
    line = WITH[:-1] + ': m("# noqa: E501")  # noqa: GM101\n'
    assert is_suppressed(line, "GM101")
    assert kept("import torch\ndef warmup(m):\n" + line, 3) == []
    assert kept("import torch\ndef warmup(m):\n" + WITH[:-1] + ': m("# noqa: GM101")  # noqa: E501\n', 3) == [3]


def test_add_noqa_after_a_string_holding_noqa_text_is_then_honoured_and_idempotent():
    source = "import torch\ndef warmup(m):\n" + WITH[:-1] + ': m("# noqa: E501")\n'
    text, refused = add_noqa(source, {3: {"GM101"}})
    assert refused == []
    assert text.splitlines()[2] == WITH[:-1] + ': m("# noqa: E501")  # noqa: GM101'
    assert kept(text, 3) == []
    assert add_noqa(text, {3: {"GM101"}}) == (text, [])


# --- codes are case-sensitive, the word noqa is not (bug 2) -------------------------------------

@pytest.mark.parametrize("comment", ["# NOQA:gm101", "# noqa: gm101", "# noqa:Gm1", "# NoQA: gm101, gm102"])
def test_noqa_codes_are_compared_case_sensitively_as_flake8_does(comment):
    line = f"{WITH}  {comment}\n"
    assert not is_suppressed(line, "GM101")
    assert kept(f"import torch\n{line}", 2) == [2]


@pytest.mark.parametrize("comment", ["# NOQA:GM101", "# NoQA: GM1", "# NOQA", "# Noqa"])
def test_noqa_word_is_matched_in_any_case(comment):
    assert is_suppressed(f"{WITH}  {comment}\n", "GM101")


def test_add_noqa_adds_an_uppercase_code_beside_a_lowercase_one():
    source = f"import torch\n{WITH}  # noqa: gm101\n"
    text, refused = add_noqa(source, {2: {"GM101"}})
    assert refused == [] and text.splitlines()[1] == f"{WITH}  # noqa: gm101, GM101"
    assert kept(text, 2) == []


# --- look-alikes that keep their meaning ---------------------------------------------------------

@pytest.mark.parametrize("comment, code, suppressed", [
    ("# noqa", "GM101", True),
    ("# noqa", "GM202", True),
    ("#noqa", "GM101", False),  # flake8 reads `# noqa` with its one space only
    ("#  noqa", "GM101", False),
    ("# noqa: GM101", "GM101", True),
    ("# noqa: GM101", "GM102", False),
    ("# noqa:GM101,GM102", "GM102", True),
    ("# noqa:GM101,GM102", "GM103", False),
    ("# noqa: GM101, GM102", "GM102", True),
    ("# noqa: GM1", "GM101", True),
    ("# noqa: GM1", "GM201", False),
    ("# noqa: E501 GM101", "GM101", True),
    ("# noqa: E501", "GM101", False),
    ("# type: ignore  # noqa: GM101", "GM101", True),
    ("# a note, not a noqa", "GM101", False),
    ("# path C:\\  # noqa: GM101", "GM101", True),
])
def test_noqa_look_alikes_keep_their_meaning(comment, code, suppressed):
    line = f"{WITH}  {comment}\n"
    assert is_suppressed(line, code) is suppressed
    assert kept(f"import torch\ndef warmup(m):\n{line}        m()\n", 3, code=code) == ([] if suppressed else [3])


def test_noqa_with_crlf_bom_and_tabs():
    crlf = "import torch\r\ndef warmup(m):\r\n" + WITH + "  # noqa: GM101\r\n        m()\r\n" + WITH + "\r\n"
    assert kept(crlf, 3, 5) == [5]
    bom = "\ufeffimport torch  # noqa: GM101\n" + WITH + "\n        m()\n"
    assert kept(bom, 1, 2) == [2]
    lone_cr = "import torch\rdef warmup(m):\r" + WITH + "  # noqa: GM101\r        m()\r" + WITH + "\r"
    assert kept(lone_cr, 3, 5) == [5]
    tabs = "import torch\ndef warmup(m):\n\twith torch.inference_mode():\t# noqa: GM101\n\t\tm()\n"
    assert kept(tabs, 3) == []
    assert is_suppressed("\twith torch.inference_mode():\t# noqa:\tGM101\n", "GM101")


def test_noqa_in_a_file_that_does_not_tokenize_honours_comments_only():
    source = ("import torch\n"
              "def warmup(m):\n"
              + WITH + "  # noqa: GM101\n"
              "        m()\n"
              + WITH[:-1] + ': m("# noqa")\n'
              "    x = '''never closed\n")
    assert kept(source, 3, 5) == [5]
    assert kept("", 1) == [1]  # a file that can no longer be read


# --- a statement's lines are one unit (bug 3) ----------------------------------------------------

BACKSLASH = ("import torch\n"
             "def warmup(m):\n"
             "    with torch.inference_mode(), \\\n"
             "            open('x'):  # noqa: GM101\n"
             "        m()\n")
TRIPLE = ("import torch\n"
          "def warmup(m):\n"
          "    with torch.inference_mode(): m(\"\"\"\n"
          "    text\"\"\")  # noqa: GM101\n")


def test_noqa_on_the_last_line_of_a_continued_statement_covers_its_first():
    assert kept(BACKSLASH, 3) == []
    assert kept(TRIPLE, 3) == []
    assert kept(BACKSLASH.replace("GM101", "GM202"), 3) == [3]
    assert kept(TRIPLE.replace("  # noqa: GM101", ""), 3) == [3]


def test_noqa_units_stop_where_flake8_stops_them():
    # inside brackets every line is its own unit (NL tokens), as for flake8
    bracket = ("import torch\ndef warmup(m):\n"
               "    with torch.inference_mode(), open(\n        'x'):  # noqa\n        m()\n")
    assert kept(bracket, 3) == [3]
    # the next statement's comment is not this one's
    assert kept(f"import torch\ndef warmup(m):\n{WITH}\n        m()  # noqa\n", 3) == [3]
    # a `# noqa` inside the multi-line string is text, not a comment
    assert kept(TRIPLE.replace("    text", "    # noqa").replace("  # noqa: GM101", ""), 3) == [3]


def test_add_noqa_puts_the_comment_on_the_last_line_of_the_unit():
    text, refused = add_noqa(BACKSLASH.replace("  # noqa: GM101", ""), {3: {"GM101"}})
    assert refused == [] and text == BACKSLASH
    text, refused = add_noqa(TRIPLE.replace("  # noqa: GM101", ""), {3: {"GM101"}})
    assert refused == [] and text == TRIPLE
    # two findings of one unit: one comment
    text, refused = add_noqa(TRIPLE.replace("  # noqa: GM101", ""), {3: {"GM101"}, 4: {"GM202"}})
    assert refused == [] and text.splitlines()[3] == '    text""")  # noqa: GM101, GM202'


def test_add_noqa_merges_into_the_units_comment_and_is_idempotent():
    source = BACKSLASH.replace("GM101", "E501")
    text, refused = add_noqa(source, {3: {"GM101"}})
    assert refused == [] and text.splitlines()[3] == "            open('x'):  # noqa: E501, GM101"
    assert add_noqa(text, {3: {"GM101"}}) == (text, [])
    assert add_noqa(BACKSLASH, {3: {"GM101"}}) == (BACKSLASH, [])
    assert add_noqa(BACKSLASH.replace("GM101", "GM1"), {3: {"GM101"}}) == (BACKSLASH.replace("GM101", "GM1"), [])
    bare = BACKSLASH.replace("# noqa: GM101", "# noqa")
    assert add_noqa(bare, {3: {"GM101"}}) == (bare, [])
    assert kept(text, 3) == []


def test_add_noqa_after_a_comment_ending_in_a_backslash():
    source = "import torch\ndef warmup(m):\n" + WITH + "  # path C:\\\n        m()\n"
    text, refused = add_noqa(source, {3: {"GM101"}})
    assert refused == []
    assert text.splitlines()[2] == WITH + "  # path C:\\  # noqa: GM101"
    assert kept(text, 3) == []
    assert add_noqa(text, {3: {"GM101"}}) == (text, [])


def test_add_noqa_keeps_crlf_and_bom():
    source = "\ufeffimport torch  # noqa: E501\r\ndef warmup(m):\r\n" + WITH + "\r\n        m()\r\n"
    text, refused = add_noqa(source, {1: {"GM999"}, 3: {"GM101"}})
    assert refused == []
    assert text == ("\ufeffimport torch  # noqa: E501, GM999\r\ndef warmup(m):\r\n" + WITH
                    + "  # noqa: GM101\r\n        m()\r\n")


def test_add_noqa_still_refuses_where_no_comment_can_go():
    broken = "import torch\n" + WITH + "\n        m()\nx = '''never closed\n"
    assert add_noqa(broken, {2: {"GM101"}}) == (broken, [2])
    assert add_noqa(BACKSLASH, {0: {"GM101"}, 99: {"GM101"}}) == (BACKSLASH, [0, 99])


# --- end to end: the CLI, --add-noqa and a rerun, and flake8 agreeing ----------------------------

def test_cli_add_noqa_then_rerun_is_clean(tmp_path, run):
    source = ("import torch\n"
              "def warmup(m):\n"
              "    with torch.inference_mode(): m(\"# noqa: E501\")\n"
              "    with torch.inference_mode(): m(\"# noqa\")\n"
              "    with torch.inference_mode(), \\\n"
              "            open('x'):\n"
              "        m()\n"
              "    with torch.inference_mode(): m(\"\"\"\n"
              "    text\"\"\")\n"
              "    with torch.inference_mode():  # path C:\\\n"
              "        m()\n")
    (tmp_path / "a.py").write_text(source)
    first = run("lints", "a.py", "--no-cache")
    assert first.returncode == 1 and cli_lines(first) == ["3", "4", "5", "8", "10"], first
    marked = run("lints", "a.py", "--no-cache", "--add-noqa")
    assert marked.returncode == 0, marked
    lines = (tmp_path / "a.py").read_text().splitlines()
    assert [lines[i] for i in (2, 3, 5, 8, 9)] == [
        '    with torch.inference_mode(): m("# noqa: E501")  # noqa: GM101',
        '    with torch.inference_mode(): m("# noqa")  # noqa: GM101',
        "            open('x'):  # noqa: GM101",
        '    text""")  # noqa: GM101',
        "    with torch.inference_mode():  # path C:\\  # noqa: GM101"]
    again = run("lints", "a.py", "--no-cache")
    assert again.returncode == 0 and again.stdout == "", again
    after = (tmp_path / "a.py").read_bytes()
    assert run("lints", "a.py", "--no-cache", "--add-noqa").returncode == 0
    assert (tmp_path / "a.py").read_bytes() == after


def test_cli_and_flake8_agree_on_units_and_code_case(tmp_path, run):
    source = ("import torch\n"
              "def warmup(m):\n"
              "    with torch.inference_mode(), \\\n"
              "            open('x'):  # noqa: GM101\n"
              "        m()\n"
              "    with torch.inference_mode(): m(\"\"\"\n"
              "    text\"\"\")  # noqa: GM101\n"
              "    with torch.inference_mode():  # NOQA:gm101\n"
              "        m()\n"
              "    with torch.inference_mode():  # NOQA:GM101\n"
              "        m()\n"
              "    with torch.inference_mode(), open(\n"
              "            'x'):  # noqa: GM101\n"
              "        m()\n"
              "    with torch.inference_mode():  #noqa\n"
              "        m()\n")
    (tmp_path / "a.py").write_text(source)
    cli = run("lints", "a.py", "--no-cache")
    assert cli.returncode == 1 and cli_lines(cli) == ["8", "12", "15"], cli
    flake8 = run("flake8", "--select", "GM", "a.py")
    assert flake8_lines(flake8) == ["8", "12", "15"], flake8


def test_cli_add_noqa_leaves_a_read_only_file_alone(tmp_path, run):
    """As the codemod: a file without write bits is an error line, not rewritten (CI may run as root, who
    could write it anyway)."""
    source = "import torch\ndef warmup(m):\n    with torch.inference_mode():\n        m()\n"
    path = tmp_path / "a.py"
    path.write_text(source)
    path.chmod(0o444)
    marked = run("lints", "a.py", "--no-cache", "--add-noqa")
    assert marked.returncode == 2 and "a.py: error: read-only file" in marked.stderr
    assert path.read_text() == source and (path.stat().st_mode & 0o777) == 0o444
