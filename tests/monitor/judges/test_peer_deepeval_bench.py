"""The peer benchmark's own code without DeepEval: the monitor's side at a tiny size (its child process, the socket
audit, the metered fake, the table and the JSON), and the brain's answers to prompts in DeepEval's format. Neither
needs the bench venv; no timing is asserted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import peer_deepeval
from tests.fake_messages_api import RecordedRequest


def test_the_peer_benchmark_runs_the_monitor_side_at_a_tiny_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One request per case, billed and attributed to the timed pass, every score in 0..1, the audit's self-test
    passed and no connection left loopback; written as printed."""
    path = tmp_path / "peer.json"
    result = peer_deepeval.main(events=6, concurrency=3, latency_ms=20, json_path=path, sides=("monitor",))
    assert json.loads(path.read_text(encoding="utf-8")) == result
    assert result["skipped"] == {} and result["ratios"] == {} and result["scores_agree"] is None
    (run,) = result["sides"]["monitor"]["runs"]
    assert run["cases"] == result["events"] == 6
    assert run["requests"] == 6 and run["requests_by_kind"] == {"judge": 6} and run["requests_per_case"] == 1
    assert run["prompt_tokens_per_case"] > run["cache_read_tokens_per_case"] > 0  # the system prompt is read from cache
    assert run["output_tokens_per_case"] > 0 and run["cpu_s"] > 0 and run["cost_per_1000_usd"] > 0
    assert all(0.0 <= s <= 1.0 for s in run["scores"])
    audit = result["isolation"]["monitor"]
    assert audit["self_test_caught"] and audit["non_loopback"] == [] and audit["lookups"] == []
    assert audit["loopback_connects"] >= 1
    traced = audit.get("strace_pass")
    if traced is not None:  # strace, where it can trace: the kernel saw the connects the hook saw, all loopback
        assert traced["kernel"]["non_loopback"] == [] and traced["hook"]["non_loopback"] == []
        assert traced["kernel"]["loopback_connects"] == traced["hook"]["loopback_connects"] >= 1
    out = capsys.readouterr().out
    assert "monitor statements judge" in out and "non-loopback connections: 0" in out


def _request(text: str) -> RecordedRequest:
    return RecordedRequest(
        method="POST",
        path="/v1/messages",
        headers={},
        raw=b"",
        body={"messages": [{"role": "user", "content": text}]},
        at=0.0,
    )


def test_the_brain_answers_deepevals_three_prompts_as_the_default_brain_judges() -> None:
    """Statements split as the default brain splits them; the off-topic one gets a "no" with a reason, the on-topic
    one a bare "yes"; the reason quotes the score; anything else goes to the default brain."""
    statements = _request(
        peer_deepeval.DEEPEVAL_PROMPTS["statements"] + " ...\n\nExample text: \nOur laptop.\n\n**\n...\n**\n\n"
        "Text:\nThanks for getting in touch. Order A17 shipped on 3 March.\n\nJSON:\n"
    )
    assert peer_deepeval.request_kind(statements) == "statements"
    assert peer_deepeval.peer_brain(statements) == {
        "statements": ["Thanks for getting in touch.", "Order A17 shipped on 3 March."]
    }
    verdicts = _request(
        peer_deepeval.DEEPEVAL_PROMPTS["verdicts"] + "\n...\n**          \n\nInput:\nWhen did order A17 ship?\n\n"
        "Statements:\n['Thanks for getting in touch.', 'Order A17 shipped on 3 March.']\n\nJSON:\n"
    )
    reply = peer_deepeval.peer_brain(verdicts)
    assert isinstance(reply, dict)
    off, on = reply["verdicts"]
    assert off["verdict"] == "no" and off["reason"] and on == {"verdict": "yes"}
    reason = _request(
        peer_deepeval.DEEPEVAL_PROMPTS["reason"] + " ...\n\nAnswer Relevancy Score:\n0.50\n\n"
        "Reasons why the score can't be higher based on irrelevant statements in the actual "
        "output:\n['x']\n\nInput:\nq\n\nJSON:\n"
    )
    assert peer_deepeval.peer_brain(reason) == {
        "reason": "The score is 0.50 because the statements that do not address the input lower it."
    }
    assert peer_deepeval.request_kind(_request("anything else")) == "judge"
    assert "error" in peer_deepeval.peer_brain(
        _request("anything else")
    )  # the default brain's answer to a non-judge prompt


def test_the_strace_reading_finds_every_peer_with_or_without_thread_padding() -> None:
    """Loopback connects are counted (IPv4, IPv4-mapped IPv6), other IP peers listed (a DNS server, an IPv6 host),
    local sockets and sends without an address ignored; the PID column may be padded once there are threads."""
    trace = "\n".join(
        [
            '895   connect(6, {sa_family=AF_INET, sin_port=htons(45717), sin_addr=inet_addr("127.0.0.1")}, 16) = -1 '
            "EINPROGRESS",
            '12 connect(3, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.255.255.53")}, 16) = 0',
            "12 connect(3, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "
            '"2a00::1", &sin6_addr)}, 28) = 0',
            '12 connect(3, {sa_family=AF_INET6, sin6_port=htons(80), inet_pton(AF_INET6, "::ffff:127.0.0.1", '
            "&sin6_addr)}, 28) = 0",
            '12 connect(3, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1 ENOENT',
            '12 sendto(7, ""..., 1712, 0, NULL, 0) = 1712',
        ]
    )
    assert peer_deepeval.parse_strace(trace) == {
        "loopback_connects": 2,
        "non_loopback": ["connect 10.255.255.53:53", "connect 2a00::1:443"],
    }
