"""``lc-agents serve``: options reach the server, warnings off loopback, one-line errors.

uvicorn's ``Server.run`` is replaced by a stub that records the app and the bound socket
(the command would otherwise serve forever); the recorded app is then served for real on
loopback and queried with the ``openai`` client. The backend is the tiny random-init
Llama (conftest).
"""

from __future__ import annotations

import socket
from typing import Any

import openai
import pytest
from fake_openai import running
from typer.testing import CliRunner

from lc_agents.cli import app

runner = CliRunner()


@pytest.fixture
def served(monkeypatch) -> dict[str, Any]:
    """What the stubbed ``uvicorn.Server.run`` received from the command: the app and the
    bound socket's address (the socket is closed; runs without sockets are real)."""
    import uvicorn

    seen: dict[str, Any] = {}
    real_run = uvicorn.Server.run

    def fake_run(self: Any, sockets: Any = None) -> None:
        if sockets is None:  # fake_openai.running serving the recorded app
            return real_run(self)
        seen["app"] = self.config.app
        seen["address"] = sockets[0].getsockname()
        for s in sockets:
            s.close()

    monkeypatch.setattr(uvicorn.Server, "run", fake_run)
    return seen


def serve(tiny_model_dir, *args: str, env: dict[str, str] | None = None):
    base = ["serve", "--model", str(tiny_model_dir), "--port", "0", "--plain"]
    return runner.invoke(app, [*base, "--chunk-tokens", "64", *args], env=env)


def _ask(url: str, key: str, model: str = "memagent") -> str:
    client = openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=60)
    reply = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "The gauge read 5.\n\nWhat did it read?"}],
    )
    return str(reply.choices[0].message.content)


def test_api_key_and_model_name_reach_the_server(served, tiny_model_dir) -> None:
    r = serve(tiny_model_dir, "--api-key", "sk-cli", "--served-model-name", "reader")
    assert r.exit_code == 0, r.output
    assert "serving MemAgent as 'reader' on http://127.0.0.1:" in r.stderr
    assert "warning" not in r.stderr.lower()  # loopback
    assert served["address"][0] == "127.0.0.1"
    with running(served["app"]) as url:
        assert _ask(url, "sk-cli", "reader")
        with pytest.raises(openai.AuthenticationError):
            _ask(url, "sk-other", "reader")


def test_api_key_from_the_environment(served, tiny_model_dir) -> None:
    r = serve(tiny_model_dir, env={"LC_AGENTS_API_KEY": "sk-env"})
    assert r.exit_code == 0, r.output
    with running(served["app"]) as url:
        assert _ask(url, "sk-env")
        with pytest.raises(openai.AuthenticationError):
            _ask(url, "unused")


def test_timeout_reaches_create_app(served, tiny_model_dir, monkeypatch) -> None:
    import lc_agents.server

    seen: dict[str, Any] = {}
    real = lc_agents.server.create_app

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(lc_agents.server, "create_app", spy)
    r = serve(tiny_model_dir, "--timeout", "2.5")
    assert r.exit_code == 0, r.output
    assert seen["request_timeout_s"] == 2.5
    assert seen["api_key"] is None
    assert seen["model_name"] == "memagent"


def test_other_interfaces_get_a_warning_and_a_stronger_one_without_key(
    served, tiny_model_dir
) -> None:
    r = serve(tiny_model_dir, "--host", "0.0.0.0")
    assert r.exit_code == 0, r.output
    lines = r.stderr.splitlines()
    assert any(ln.startswith("warning: --host 0.0.0.0 is not a loopback address") for ln in lines)
    assert any(ln.startswith("WARNING: no --api-key") for ln in lines)
    r = serve(tiny_model_dir, "--host", "0.0.0.0", "--api-key", "sk-x")
    assert r.exit_code == 0, r.output
    assert "not a loopback address" in r.stderr
    assert "no --api-key" not in r.stderr
    for loopback in ("localhost", "127.0.0.2"):
        r = serve(tiny_model_dir, "--host", loopback)
        assert r.exit_code == 0, r.output
        assert "warning" not in r.stderr.lower()


def _one_error(r, code: int) -> str:
    assert r.exit_code == code, r.output
    assert "Traceback" not in r.output
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, r.stderr
    return errors[0]


def test_a_port_in_use_is_one_error_line(tiny_model_dir) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = runner.invoke(app, ["serve", "--model", str(tiny_model_dir), "--port", str(port)])
    line = _one_error(r, 1)
    assert f"cannot listen on 127.0.0.1:{port}" in line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--endpoint", "localhost:9000", "--model", "m"],
            "needs a scheme: http://localhost:9000/v1",
        ),
        (["--timeout", "-1"], "--timeout must be > 0"),
        (["--api-key", " "], "is empty"),
        (["--preset", "nope"], "is not a preset"),
        (["--model", "no-such-model"], "unknown --model"),
    ],
)
def test_bad_serve_options(args, message) -> None:
    r = runner.invoke(app, ["serve", "--port", "0", *args])
    assert message in _one_error(r, 2)
