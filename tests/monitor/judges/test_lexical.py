"""The lexical heuristic: the padded/tight pair, empty and echoed answers."""

from __future__ import annotations

from monitor.judges.lexical import LexicalJudge, score_lexical, split_sentences

Q = "When did order A17 ship?"


def test_padding_lowers_the_score() -> None:
    """Padding sentences lower the heuristic score to 1/3 while the tight answer scores 1."""
    padded = score_lexical(Q, "Thanks for getting in touch. We also sell gift cards. Order A17 shipped on 3 March.")
    tight = score_lexical(Q, "Order A17 shipped on 3 March.")
    assert abs(padded.score - 1 / 3) < 1e-9 and tight.score == 1.0
    assert padded.verdicts == ("no", "no", "yes") and len(padded.statements) == 3
    assert padded.reasoning.startswith("heuristic")


def test_off_topic_empty_and_echo_score_zero() -> None:
    """Off-topic, empty and echoed answers all score 0, the echo with reason 'repeats the question'."""
    assert score_lexical("Do I need a visa for Japan?", "Our loyalty programme gives double points!").score == 0.0
    empty = score_lexical(Q, "   \n ")
    assert empty.score == 0.0 and empty.statements == ()
    echo = score_lexical(Q, "When did order A17 ship?")
    assert echo.score == 0.0 and echo.verdict_reasons == ("repeats the question",)


def test_sentence_split() -> None:
    """Sentences split after . ! ? and at newlines, keeping a final unterminated one."""
    assert split_sentences("One. Two!\nThree? four") == ["One.", "Two!", "Three?", "four"]


async def test_judge_is_labelled_heuristic() -> None:
    """The lexical judge is labelled heuristic with a lexical- id and scores a relevant answer 1."""
    j = LexicalJudge()
    assert j.info.heuristic and j.info.method == "lexical" and j.info.judge_id.startswith("lexical-")
    assert (await j.judge(Q, "Order A17 shipped.")).score == 1.0


async def test_a_redaction_placeholder_matches_only_the_same_placeholder() -> None:
    """[IP] in the question and in the answer is the same item; [CARD] is not the word "cards"."""
    judge = LexicalJudge()
    same = await judge.judge("Why is [IP] blocked?", "Yes, [IP] is on the deny list.")
    word = await judge.judge("Will the refund go back to [CARD]?", "Gift cards never expire.")
    assert (same.score, word.score) == (1.0, 0.0)
