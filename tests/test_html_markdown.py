"""The HTML export's Markdown, in-process: nothing an agent writes is left out of the page,
and nothing in it is fetched (issue 30, item 13)."""

from __future__ import annotations

import re

import pytest

from acpctl.terminal.html_export import _markdown
from tests.attacks import ATTACKS


@pytest.mark.parametrize(
    "nested",
    ["- " * 3000 + "deep", "> " * 5000 + "deep", "1. " * 2000 + "deep", "  - x\n" * 50 + "deep"],
    ids=["list", "quote", "ordered", "indented"],
)
def test_markdown_nested_past_the_renderers_limit_keeps_every_word(nested: str) -> None:
    text = f"{nested}\n\nafter the deep part: the rest of the message"
    page = _markdown(text)
    assert "after the deep part: the rest of the message" in page
    assert "deep" in page


def test_ordinary_markdown_is_still_rendered() -> None:
    page = _markdown("- a\n  - b\n    - c\n\n**bold** and `code`")
    assert "<ul>" in page and "<strong>bold</strong>" in page and "<code>code</code>" in page


def test_images_become_links_so_the_page_fetches_nothing() -> None:
    page = _markdown('![a cat](http://tracker.example/pixel.png "t") and ![](https://x/i.png)')
    assert "<img" not in page
    assert '<a href="http://tracker.example/pixel.png">a cat</a>' in page
    assert '<a href="https://x/i.png">https://x/i.png</a>' in page
    assert not re.search(r"href=\"javascript:", _markdown("![x](javascript:alert(1))"))


@pytest.mark.parametrize("seed", range(30))
def test_generated_deep_markdown_keeps_every_word(seed: int) -> None:
    import random

    generator = random.Random(seed)
    markers = ["- ", "> ", "1. ", "* ", "+ ", "  ", ">"]
    depth = generator.randint(1, 400)
    prefix = "".join(generator.choice(markers) for _ in range(depth))
    words = [f"word{n}" for n in range(generator.randint(1, 5))]
    text = prefix + " ".join(words) + "\n\n" + "tail" + str(seed)
    page = _markdown(text)
    for word in [*words, f"tail{seed}"]:
        assert word in page, (prefix[:40], word)


@pytest.mark.parametrize("attack", ATTACKS)
def test_the_attack_corpus_is_text_in_the_export(attack: str) -> None:
    """The corpus the host's page is tested with (tests/attacks.py): in the export too,
    nothing of it runs, loads or hides."""
    shown = _markdown(attack)
    assert "ATTACK" in shown
    tags = re.findall(r"<([a-zA-Z]+)([^>]*)>", shown)  # the elements made (not the text)
    assert {name.lower() for name, _ in tags} <= {"p", "a", "em", "strong", "code"}, tags
    for _, attributes in tags:
        assert not re.search(r"\son\w+\s*=|style\s*=", attributes, re.I), attributes
        assert not re.search(r"href=\"(javascript|data):", attributes, re.I), attributes
