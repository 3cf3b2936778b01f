"""deliver/interop/toml_out.py: what import writes reads back with tomllib, whatever text a Definition carries."""

import tomllib

from hypothesis import given, settings
from hypothesis import strategies as st

from kernelloop.deliver.interop.toml_out import comment, string


def test_control_characters_in_a_comment_are_written_visibly():
    # found by benchmarks/fuzz_loaders.py: a description holding U+001F made spec.toml unreadable
    lines = comment("a\x1fb\x00c\x7fd\te")
    assert lines == ["# a\\x1fb\\x00c\\x7fd\te"]
    assert tomllib.loads("\n".join(lines) + "\nx = 1") == {"x": 1}


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_as_comment_and_string_reads_back(text):
    doc = "\n".join(comment(text)) + f"\nv = {string(text)}\n"
    assert tomllib.loads(doc) == {"v": text}
