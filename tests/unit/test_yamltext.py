"""The library's YAML parsing: the same values and the same error messages as PyYAML's safe loader."""

import pytest
import yaml
from skillbench.base import yamltext

DOCUMENTS = [
    "a: 1\nb: [x, 'y', 2.5, true, null]\n",
    "base: &b {k: v, n: 3}\nuse: *b\nlist:\n  - <<: *b\n    n: 4\n",
    "when: 2026-12-02\ntext: |\n  line one\n  line two\n",
    "",
]


@pytest.mark.parametrize("text", DOCUMENTS)
def test_values_match_pyyamls_safe_loader(text):
    assert yamltext.safe_load(text) == yaml.safe_load(text)


@pytest.mark.parametrize("text", ["a: [1, 2\nb: 3\n", "key: value\n  bad: indent\n", "x: *nowhere\n"])
def test_malformed_text_raises_the_pure_parsers_message(text):
    with pytest.raises(yaml.YAMLError) as expected:
        yaml.safe_load(text)
    with pytest.raises(yaml.YAMLError) as got:
        yamltext.safe_load(text)
    assert str(got.value) == str(expected.value)


def test_unsafe_tags_are_refused():
    with pytest.raises(yaml.YAMLError):
        yamltext.safe_load("!!python/object/apply:os.system ['true']\n")
