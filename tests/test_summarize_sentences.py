"""Sentence splitting (nodes/lib/sentences.py): English and Chinese punctuation, abbreviations."""

from __future__ import annotations

import pytest

from ctxengine.nodes.lib.sentences import sentence_spans, split_sentences


def test_english_sentences_split_at_terminal_punctuation():
    text = "The parser is done. Does it handle errors? Yes! It reports the line."
    assert split_sentences(text) == [
        "The parser is done.",
        "Does it handle errors?",
        "Yes!",
        "It reports the line.",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Use a fast format, e.g. JSON Lines, for the log.",
        "Keep one driver per process, i.e. build it once and reuse it.",
        "Dr. Smith and Mr. Jones reviewed it vs. the old design.",
        "Upgrade to version 1.2.3 before Friday.",
        "The code lives in nodes/lib/summarize.py and tests in tests/test_x.py today.",
        "It costs 3.14 dollars and takes 0.5 seconds.",
        "Read config.json then call foo.bar() at startup.",
        "Tolkien, J. R. R. wrote it.",
        "See Fig. 3 and No. 5 for details.",
    ],
)
def test_abbreviations_versions_files_and_decimals_do_not_split(text):
    assert split_sentences(text) == [text]


def test_sentence_after_a_file_name_or_number_still_splits():
    assert split_sentences("Edit foo.py. Then run it.") == ["Edit foo.py.", "Then run it."]
    assert split_sentences("It was released in 2024. Nobody noticed.") == ["It was released in 2024.", "Nobody noticed."]
    assert split_sentences("Run pytest -q.\nThen check the output.") == ["Run pytest -q.", "Then check the output."]


def test_etc_splits_only_before_a_capital():
    assert split_sentences("Add tests, docs, etc. and ship.") == ["Add tests, docs, etc. and ship."]
    assert split_sentences("Add tests, docs, etc. Then ship.") == ["Add tests, docs, etc.", "Then ship."]


def test_chinese_punctuation_splits_without_spaces():
    text = "我们使用Python实现解析器。它能处理错误吗？当然能！第一步是读取文件；第二步是解析"
    assert split_sentences(text) == [
        "我们使用Python实现解析器。",
        "它能处理错误吗？",
        "当然能！",
        "第一步是读取文件；",
        "第二步是解析",
    ]


def test_full_width_and_half_width_variants_and_closing_quotes():
    assert split_sentences("他说：“完成了。”然后离开了｡下一句．最后一句") == [
        "他说：“完成了。”",
        "然后离开了｡",
        "下一句．",
        "最后一句",
    ]
    # ASCII ! and ? right after a Chinese character end a sentence too
    assert split_sentences("真的吗?是的!好") == ["真的吗?", "是的!", "好"]


def test_mixed_english_and_chinese():
    text = "The engine is fast. 它很快。It is also deterministic!"
    assert split_sentences(text) == ["The engine is fast.", "它很快。", "It is also deterministic!"]


def test_closing_brackets_and_quotes_stay_with_their_sentence():
    assert split_sentences('He said "stop." Then left. (See the docs.) Next.') == [
        'He said "stop."',
        "Then left.",
        "(See the docs.)",
        "Next.",
    ]


def test_spans_cover_text_without_surrounding_space():
    text = "  One. Two!  \n Three?  "
    spans = sentence_spans(text)
    assert [text[a:b] for a, b in spans] == ["One.", "Two!", "Three?"]
    assert all(a < b for a, b in spans)
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))


def test_empty_and_whitespace():
    assert split_sentences("") == []
    assert split_sentences("   \n ") == []
