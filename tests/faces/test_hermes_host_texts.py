"""Hermes's own interrupt texts told from the person's words (``endless.faces.hermes.host_texts``, issue 33 item 3)."""

from __future__ import annotations

import pytest

from endless.faces.hermes.host_texts import answer, is_host_text, stopped_by_host, without_host_texts


@pytest.mark.parametrize("text", ["received signal 15", "received signal 1", " Received  Signal 2\n",
                                  "keyboard interrupt", "Stop requested", "Gateway shutting down",
                                  "SSE client disconnected", "Cron job timed out (inactivity)",
                                  "Interrupted via TUI (sub-3)"])
def test_hermes_s_own_texts_are_recognised(text: str) -> None:
    assert is_host_text(text)


@pytest.mark.parametrize("text", ["", "received signal 15, what does it mean?", "I received signal 15 twice",
                                  "received signal", "received signal 150", "keyboard interrupts", "stop",
                                  "please stop requested work", "Interrupted via TUI"])
def test_the_person_s_words_are_not(text: str) -> None:
    assert not is_host_text(text)


def test_the_sentences_name_the_text_and_no_person() -> None:
    assert "received signal 15" in stopped_by_host("received  signal 15") and "not the person" in stopped_by_host("x")
    assert "received signal 15" in answer("received signal 15") and "no model was asked" in answer("x")


def test_hermes_s_texts_joined_to_a_message_are_cut_out_of_it() -> None:
    assert without_host_texts("Take your time\n\nreceived signal 15") == "Take your time"
    assert without_host_texts("received signal 15") == "" and without_host_texts("a\n\nb") == "a\n\nb"
    assert without_host_texts("it said\n\nreceived signal 15 twice") == "it said\n\nreceived signal 15 twice"
